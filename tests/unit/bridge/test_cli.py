"""`beltsight bridge`: the one config file (`[bridge]` validated with the rest), the layout from
`[[cameras]]`, exit 78 naming the key path; `check-config` accepts `[bridge]`."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from daemon.__main__ import main
from daemon.bridge import cli
from daemon.bridge.cli import load
from daemon.config.settings import EX_CONFIG, ConfigError

REPO = Path(__file__).resolve().parents[3]

BASE = """
[redis]
objects_stream = "plant:objects:{camera}"
events_stream = "plant:events"

[models]
640 = "m640.onnx"

[engine]
providers = ["cpu"]

[[cameras]]
id = "infeed"
url = "rtsp://10.0.0.21:554/stream1"
mm_per_px = 0.5
[[cameras.lines]]
id = "L1"
start = [0.5, 0.0]
end = [0.5, 1.0]
gates = [{ id = "reject", distance_mm = 1200 }, { id = "divert", distance_mm = 2400 }]
[[cameras.lines]]
id = "L2"
start = [0.8, 0.0]
end = [0.8, 1.0]

[[cameras]]
id = "spare"
url = "rtsp://10.0.0.22:554/stream1"
enabled = false

[[cameras]]
id = "outfeed"
url = "rtsp://10.0.0.23:554/stream1"
[[cameras.lines]]
id = "L1"
start = [0.5, 0.0]
end = [0.5, 1.0]
"""

BRIDGE = """
[bridge]
health_listen = "127.0.0.1:9109"
[bridge.opcua]
listen = "127.0.0.1:4840"
security = "basic256sha256"
users = { plc = { password = "plc-secret-42" } }
[bridge.modbus]
listen = "127.0.0.1:5020"
unit_id = 1
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "beltsight.toml"
    path.write_text(text)
    return path


def run_bridge_cli(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "daemon", "bridge", "-c", str(path)],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
        env={"PATH": ""},
        timeout=60,
    )


def test_the_layout_is_the_enabled_cameras_lines_and_gates_in_config_order(tmp_path: Path) -> None:
    settings, layout = load(write(tmp_path, BASE + BRIDGE))
    assert [(c.id, [(ln.id, ln.gates) for ln in c.lines]) for c in layout.cameras] == [
        ("infeed", [("L1", ("reject", "divert")), ("L2", ())]),
        ("outfeed", [("L1", ())]),
    ]
    assert layout.blocks() == [("infeed", "L1"), ("infeed", "L2"), ("outfeed", "L1")]
    assert settings.bridge.opcua.users["plc"].secret() == "plc-secret-42"
    assert settings.redis.objects_stream_for("infeed") == "plant:objects:infeed"


def test_env_overrides_and_password_files_work_as_for_the_daemon(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = tmp_path / "plc-password"
    secret.write_text("from-a-file\n")
    text = BASE + BRIDGE.replace('password = "plc-secret-42"', f'password_file = "{secret}"')
    monkeypatch.setenv("BELTSIGHT_BRIDGE__MODBUS__LISTEN", "")
    settings, _ = load(write(tmp_path, text))
    assert settings.bridge.opcua.users["plc"].secret() == "from-a-file"
    assert settings.bridge.modbus.listen is None
    secret.unlink()
    with pytest.raises(ConfigError) as info:
        load(tmp_path / "beltsight.toml")
    assert info.value.errors[0].startswith("bridge.opcua.users.plc.password_file: cannot read secret file")


def test_every_layout_problem_is_listed_with_the_key_path_of_the_config_file(tmp_path: Path) -> None:
    text = (BASE + BRIDGE).replace('id = "L2"', 'id = "CountIn"').replace('id = "divert"', 'id = "Heartbeat"')
    text = text.replace('id = "outfeed"', 'id = "State"')
    with pytest.raises(ConfigError) as info:
        load(write(tmp_path, text))
    paths = [e.split(":", 1)[0] for e in info.value.errors]
    # cameras.1 is disabled: the third camera keeps its index in the file
    assert paths == ["cameras.0.lines.0.gates.1.id", "cameras.0.lines.1.id", "cameras.2.id"]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (('id = "L2"', 'id = "CountIn"'), "cameras.0.lines.1.id: 'CountIn' is a fixed node name"),
        (("unit_id = 1", "unit_id = 1\nbogus = 3"), "bridge.modbus.bogus: unknown key"),
        (('health_listen = "127.0.0.1:9109"', 'health_listen = "nohost"'), "bridge.health_listen: must be host:port"),
        (
            (
                "unit_id = 1",
                'unit_id = 1\n\n[bridge.sparkplug]\nurl = "mqtt://127.0.0.1:1"\nusername = "edge"\n'
                'password_file = "/nonexistent/mqtt-pw"',
            ),
            "bridge.sparkplug.password_file:",
        ),
    ],
)
def test_beltsight_bridge_exits_78_naming_the_key(tmp_path: Path, change: tuple[str, str], expected: str) -> None:
    text = (BASE + BRIDGE).replace(*change)
    text = text.replace('users = { plc = { password = "plc-secret-42" } }', 'users = { plc = { password = "pw-77x" } }')
    proc = run_bridge_cli(write(tmp_path, text))
    assert proc.returncode == EX_CONFIG, proc.stdout + proc.stderr
    record = json.loads(proc.stderr.strip().splitlines()[-1])  # not a terminal: one JSON line for the journal
    assert record["event"] == "bridge_config_invalid"
    assert expected in record["error"], record["error"]
    assert "pw-77x" not in proc.stdout + proc.stderr


def test_check_config_accepts_bridge_sections_and_redacts_the_passwords(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check-config", "-c", str(write(tmp_path, BASE + BRIDGE))]) == 0
    out, err = capsys.readouterr()
    bridge = json.loads(out)["bridge"]
    assert bridge["opcua"]["listen"] == "127.0.0.1:4840" and bridge["modbus"]["unit_id"] == 1
    assert bridge["health_listen"] == "127.0.0.1:9109"
    assert "plc-secret-42" not in out + err
    # the streams are [redis]'s: [bridge] has no stream keys
    stale = (BASE + BRIDGE).replace("[bridge]\n", "[bridge]\nobjects_stream = 'x:{camera}'\n", 1)
    assert main(["check-config", "-c", str(write(tmp_path, stale))]) == EX_CONFIG
    assert "bridge.objects_stream: unknown key" in capsys.readouterr().err


def test_the_signal_handlers_are_installed_before_the_bridge_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Building the Bridge does I/O (the Modbus blocks file, the reconcile store): a SIGTERM in that
    window is handled (the stop asked, served by the bridge once built), never the default action."""
    seen: list[str] = []

    class Built:
        def __init__(self, *args: object, **kwargs: object) -> None:
            handled = signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None)
            seen.append(f"handled={handled}")
            self.stopped = asyncio.Event()
            if handled:  # only then: the default action would end the test run
                os.kill(os.getpid(), signal.SIGTERM)

        def request_stop(self) -> None:
            seen.append("stop")
            self.stopped.set()

        def request_reload(self) -> None:
            seen.append("reload")

        async def run(self) -> None:
            await asyncio.wait_for(self.stopped.wait(), 10)

    monkeypatch.setattr(cli, "Bridge", Built)
    settings, layout = load(write(tmp_path, BASE + BRIDGE))
    asyncio.run(cli._serve(tmp_path / "beltsight.toml", settings, layout))
    assert seen == ["handled=True", "stop"]
