"""What a new user meets when the demo cannot run: one line saying what and how to fix it.

The checks run before anything is started or rendered, so these tests are quick; the demo's
successful run is the README's first command, which CI runs as written (`.ci/run`).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.waits import wait_until
from tools.kit import leash
from tools.kit.ports import free_port

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "tools" / "demo.py"


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def demo(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(DEMO), *args], capture_output=True, text=True, timeout=timeout, env=env, check=False
    )


def ports(**chosen: int) -> list[str]:
    args = []
    for name in ("redis", "rtsp", "health", "opcua", "modbus", "bridge-health"):
        args += [f"--{name}-port", str(chosen.get(name) or free_port())]
    return args


@pytest.mark.parametrize(
    ("name", "what"),
    [
        ("redis", "Redis"),
        ("rtsp", "RTSP server"),
        ("health", "health endpoint"),
        ("opcua", "the bridge's OPC UA server"),
        ("modbus", "the bridge's Modbus TCP server"),
        ("bridge-health", "the bridge's health endpoint"),
    ],
)
def test_a_taken_port_is_named_with_its_holder_and_the_option(
    name: str, what: str, taken_port: int, tmp_path: Path
) -> None:
    result = demo(*ports(**{name: taken_port}), "--data-dir", str(tmp_path))
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr  # one line, no traceback
    line = lines[0]
    assert f"port {taken_port} ({what})" in line
    assert f"--{name}-port N" in line
    assert f"pid {os.getpid()}" in line  # this test's process holds it, and /proc says so
    assert not list(tmp_path.iterdir())  # nothing was started or rendered


def test_missing_redis_server_names_the_package(tmp_path: Path) -> None:
    env = dict(os.environ, PATH=str(tmp_path))  # nothing on PATH
    result = demo(*ports(), "--data-dir", str(tmp_path / "data"), env=env)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1, result.stderr
    assert "redis-server is not installed" in result.stderr
    assert "Debian package redis-server" in result.stderr


def test_missing_gstreamer_names_the_packages(tmp_path: Path) -> None:
    # a Python that cannot import gi, as on a machine without python3-gi: this one without its
    # site-packages (the virtualenv's own can import gi where the gige extra brought PyGObject)
    no_gi = tmp_path / "python-without-gi"
    no_gi.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    no_gi.chmod(0o755)
    result = demo(*ports(), "--data-dir", str(tmp_path / "data"), "--gst-python", str(no_gi))
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1, result.stderr
    assert "GStreamer's RTSP server is not usable" in result.stderr
    assert "gir1.2-gst-rtsp-server-1.0" in result.stderr and "python3-gi" in result.stderr


@pytest.mark.slow
@pytest.mark.timeout(900)  # rendering starts after the demo's imports and checks: minutes on a loaded box
def test_ctrl_c_while_rendering_leaves_no_half_written_clip(tmp_path: Path) -> None:
    data = tmp_path / "data"
    proc = leash.spawn(
        # as started from a terminal (coreutils' `env --default-signal`, which execs the command): a test
        # run in the background (`pytest &` in a script) has SIGINT ignored, the child would inherit that,
        # and Python then never turns Ctrl-C into KeyboardInterrupt. Not a `preexec_fn`: it runs Python in
        # the forked child (`tools.kit.leash` says why that can hang).
        ["env", "--default-signal=INT", sys.executable, str(DEMO), *ports(), "--data-dir", str(data), "--seconds", "5"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "rendering line1-infeed" in line, line

        def rendering() -> bool:  # the partial clip is open (its first bytes wait for the encoder's lookahead)
            assert proc.poll() is None, "the demo ended before it was interrupted"
            return any(data.glob("*.partial.*"))

        wait_until(rendering, 600, "the partial clip")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=240)  # the interrupt lands between two encoded frames
    finally:
        if proc.poll() is None:  # a failed wait must not leave a demo rendering beside the next tests
            proc.kill()
            proc.communicate(timeout=60)
    assert proc.returncode == 130, (line, out, err)
    assert "Traceback" not in err
    assert "no half-rendered clip is kept" in out
    assert sorted(p.name for p in data.iterdir()) == []  # neither the partial clip nor its ground truth
