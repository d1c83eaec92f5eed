"""What every config section shares: the `Section` base, `Seconds`, a problem in the config's words, and reading
secret files."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote, urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field

Seconds = Annotated[float, Field(gt=0)]


class Section(BaseModel):
    """The base of every section: unknown keys are errors, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def problem_text(err: Any) -> str:
    """One pydantic error as `key.path: message` (the config's wording)."""
    loc = ".".join(str(part) for part in err["loc"]) or "(top level)"
    msg = str(err["msg"]).removeprefix("Value error, ")
    return f"{loc}: {'unknown key' if err['type'] == 'extra_forbidden' else msg}"


def read_secret_file(path: Path) -> str:
    """A `*_file` secret (e.g. a systemd credential), stripped; ValueError when it cannot be read."""
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ValueError(f"cannot read secret file {path}: {exc.strerror}") from None


def with_password(url: str, password: str) -> str:
    """`url` with its password replaced by `password` (percent-encoded), the user and port kept."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    user = parts.username or ""
    netloc = f"{user}:{quote(password, safe='')}@{host}"
    if parts.port is not None:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


__all__ = ["Seconds", "Section", "problem_text", "read_secret_file", "with_password"]
