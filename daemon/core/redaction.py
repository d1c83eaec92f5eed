"""Keeping secrets (RTSP and Redis passwords) out of logs, errors and metrics."""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

REDACTED = "***"

# scheme://user:password@host -> scheme://user:***@host ; also scheme://:password@host
_URL_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<user>[^:/@\s]*):(?P<pw>[^@\s/]*)@")


def redact_url(url: str) -> str:
    """Return `url` with any password replaced by `***` (user name kept, it helps operators)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return redact_text(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = f"{parts.username or ''}:{REDACTED}@{host}"
    if parts.port is not None:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def redact_text(text: str, secrets: tuple[str, ...] = ()) -> str:
    """Redact URL passwords anywhere in free text, plus any known secret values."""
    out = _URL_USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:{REDACTED}@", text)
    for secret in secrets:
        if secret:
            out = out.replace(secret, REDACTED)
    return out


class SecretRegistry:
    """Secret values known at runtime (passwords from files or URLs), scrubbed from every log line."""

    def __init__(self) -> None:
        self._secrets: set[str] = set()

    def add(self, secret: str | None) -> None:
        if secret and len(secret) >= 3:
            self._secrets.add(secret)

    def add_from_url(self, url: str) -> None:
        try:
            self.add(urlsplit(url).password)
        except ValueError:
            return

    def scrub(self, text: str) -> str:
        return redact_text(text, tuple(sorted(self._secrets, key=len, reverse=True)))


SECRETS = SecretRegistry()
"""Process-wide registry: config loading adds every password it sees; the log pipeline scrubs them."""
