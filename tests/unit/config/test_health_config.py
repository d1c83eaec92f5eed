"""`[health]` TLS and basic-auth keys: defaults unchanged (plain, open), half a TLS pair, unreadable or
mismatched files, encrypted keys and malformed bcrypt hashes are config errors naming the key, and
check-config never prints a hash."""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
from pathlib import Path

import bcrypt
import pytest

from daemon.__main__ import main
from daemon.config.settings import EX_CONFIG, ConfigError, load_settings

REPO = Path(__file__).resolve().parents[3]
HASH = bcrypt.hashpw(b"secret", bcrypt.gensalt(4)).decode()

BASE = f"""
[models]
640 = "{REPO / "models" / "conveyor-640.onnx"}"

[[cameras]]
id = "cam1"
url = "rtsp://127.0.0.1:8554/a"
"""


def config(tmp_path: Path, health: str) -> Path:
    path = tmp_path / "beltsight.toml"
    path.write_text(f"[health]\n{health}\n{BASE}")
    return path


def errors(tmp_path: Path, health: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_settings(config(tmp_path, health))
    return info.value.errors


@pytest.fixture(scope="module")
def pems(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("openssl") is None:
        pytest.skip("openssl not installed")
    d = tmp_path_factory.mktemp("pems")
    for name in ("a", "b"):
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-days", "1", "-subj", "/CN=localhost", "-keyout", f"{name}.key", "-out", f"{name}.crt"],
            cwd=d, check=True, capture_output=True, timeout=60,
        )  # fmt: skip
    subprocess.run(
        ["openssl", "pkey", "-in", "a.key", "-aes256", "-passout", "pass:pw", "-out", "encrypted.key"],
        cwd=d, check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return d


def test_defaults_stay_plain_http_without_authentication(tmp_path: Path) -> None:
    health = load_settings(config(tmp_path, "")).health
    assert health.listen == "127.0.0.1:9108"
    assert health.tls_context() is None and health.basic_auth_users == {} and health.healthz_open is True


def test_a_tls_pair_loads_a_tls12_server_context(tmp_path: Path, pems: Path) -> None:
    health = load_settings(config(tmp_path, f'tls_cert_file = "{pems}/a.crt"\ntls_key_file = "{pems}/a.key"')).health
    context = health.tls_context()
    assert context is not None and context.minimum_version == ssl.TLSVersion.TLSv1_2


def test_half_a_tls_pair_is_an_error_naming_the_missing_key(tmp_path: Path, pems: Path) -> None:
    assert errors(tmp_path, f'tls_cert_file = "{pems}/a.crt"') == [
        "health: tls_cert_file and tls_key_file go together: tls_key_file is missing"
    ]
    assert errors(tmp_path, f'tls_key_file = "{pems}/a.key"') == [
        "health: tls_cert_file and tls_key_file go together: tls_cert_file is missing"
    ]


@pytest.mark.parametrize(
    ("cert", "key", "expected"),
    [
        ("a.crt", "missing.key", "tls_key_file: cannot read"),
        ("missing.crt", "a.key", "tls_cert_file: cannot read"),
        ("a.crt", "b.key", "do not load as a PEM certificate and its (unencrypted) key"),
        ("a.key", "a.crt", "do not load as a PEM certificate"),
        ("a.crt", "encrypted.key", "the key is encrypted"),
    ],
)
def test_bad_tls_files_are_config_errors(tmp_path: Path, pems: Path, cert: str, key: str, expected: str) -> None:
    (got,) = errors(tmp_path, f'tls_cert_file = "{pems}/{cert}"\ntls_key_file = "{pems}/{key}"')
    assert got.startswith("health: ") and expected in got, got


def test_users_with_bcrypt_hashes_load(tmp_path: Path) -> None:
    htpasswd_style = HASH.replace("$2b$", "$2y$", 1)
    health = load_settings(
        config(tmp_path, f'basic_auth_users = {{ ops = "{HASH}", prom = "{htpasswd_style}" }}\nhealthz_open = false')
    ).health
    assert health.basic_auth_users == {"ops": HASH, "prom": htpasswd_style} and health.healthz_open is False


@pytest.mark.parametrize(
    ("users", "expected"),
    [
        ('{ ops = "secret" }', "user 'ops': not a bcrypt hash"),
        ('{ ops = "$2b$10$tooshort" }', "user 'ops': not a bcrypt hash"),
        (f'{{ ops = "{HASH[:-1]}" }}', "user 'ops': not a bcrypt hash"),
        (f'{{ ops = "{HASH.replace("$04$", "$03$")}" }}', "user 'ops': not a bcrypt hash"),
        (f'{{ "a:b" = "{HASH}" }}', "user name 'a:b': must be non-empty, without ':'"),
        (f'{{ "" = "{HASH}" }}', "user name '': must be non-empty, without ':'"),
    ],
)
def test_malformed_hashes_and_names_are_config_errors(tmp_path: Path, users: str, expected: str) -> None:
    (got,) = errors(tmp_path, f"basic_auth_users = {users}")
    assert got.startswith("health.basic_auth_users: ") and expected in got, got
    assert "secret" not in got.split(":", 1)[1].replace("not a bcrypt hash", "")


def test_check_config_names_the_users_never_their_hashes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = config(tmp_path, f'basic_auth_users = {{ ops = "{HASH}" }}')
    assert main(["check-config", "-c", str(path)]) == 0
    out = capsys.readouterr().out
    assert HASH not in out and "ops" in out
    bad = config(tmp_path, 'basic_auth_users = { ops = "nope" }')
    assert main(["check-config", "-c", str(bad)]) == EX_CONFIG
    assert json.dumps("nope") not in capsys.readouterr().out
