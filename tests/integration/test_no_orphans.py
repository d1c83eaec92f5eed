"""A test run killed with SIGKILL leaves nothing behind (tools/kit/leash.py: a parent-death signal).

A real pytest run in a subprocess starts a redis-server and the GStreamer RTSP server from its main
thread and the daemon (`run_cli`, tests/support/daemon_harness.py) from a worker thread, waits for
the daemon's first entries in Redis, and is then killed with SIGKILL. Every process below it must
be gone within seconds: none of them may keep a port, a CPU or a file after the run that owned it.
"""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.support.fixtures_rtsp import _system_python_has_rtsp_server
from tools.kit import leash

REPO = Path(__file__).resolve().parents[2]

INNER = """
import shutil
import threading
import time
from pathlib import Path

import redis

from tests.support.daemon_harness import run_cli, write_config
from tests.support.fixtures_redis import RedisServer
from tests.support.fixtures_rtsp import render_pattern_clip
from tools.kit.rtsp import RtspServer

WORK = Path({work!r})


def test_start_everything_then_wait_to_be_killed() -> None:
    clip = WORK / "clip.mp4"
    render_pattern_clip(clip, 320, 240, 10, 30, seed=5)
    server = RedisServer(shutil.which("redis-server") or "redis-server", None).start()
    rtsp = RtspServer({{"cam": clip}}).start()
    config = write_config(WORK / "b.toml", redis_url=server.url, cameras=[{{"id": "a", "url": rtsp.url("cam")}}])
    # from a worker thread: the kit forks on its own thread, so the child outlives this one
    threading.Thread(target=run_cli, args=("run", "-c", str(config)), kwargs={{"timeout_s": 600}}).start()
    client = redis.Redis(port=server.port)
    deadline = time.monotonic() + 120
    while not client.keys("beltsight:detections:*") and time.monotonic() < deadline:
        time.sleep(0.2)
    (WORK / "ready").write_text("ok")
    time.sleep(600)
"""


def descendants(root: int) -> dict[int, str]:
    """Every live process under `root` (pid -> command line), from /proc."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found: dict[int, str] = {}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, ppid in parents.items():
            if ppid == parent and pid not in found:
                found[pid] = cmdline(pid)
                frontier.append(pid)
    return found


def cmdline(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def alive(pid: int) -> bool:
    """Running (a zombie waiting for a reaper is dead: it holds no port, no CPU)."""
    try:
        stat = (Path("/proc") / str(pid) / "stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="the parent-death signal is Linux's")
def test_a_killed_test_run_leaves_no_server_and_no_daemon(tmp_path: Path) -> None:
    if not _system_python_has_rtsp_server():
        pytest.skip("the RTSP server needs /usr/bin/python3 with gi (tools/bootstrap.sh --dev)")
    (tmp_path / "test_inner.py").write_text(textwrap.dedent(INNER).format(work=str(tmp_path)))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path)]
    proc = leash.spawn([*argv, str(tmp_path / "test_inner.py")], cwd=tmp_path, env=env)
    children: dict[int, str] = {}
    try:
        deadline = time.monotonic() + 180
        while not (tmp_path / "ready").exists():
            assert proc.poll() is None, "the inner run ended before it was ready"
            assert time.monotonic() < deadline, "the inner run never got ready"
            time.sleep(0.2)
        children = descendants(proc.pid)
        kinds = {
            "redis-server": [p for p, c in children.items() if "redis-server" in c],
            "rtsp server": [p for p, c in children.items() if "rtsp_server.py" in c],
            "daemon": [p for p, c in children.items() if "-m daemon run" in c],
        }
        assert all(kinds.values()), f"not everything started: {children}"
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 10
        while any(alive(pid) for pid in children) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = {pid: children[pid] for pid in children if alive(pid)}
        assert not left, f"left behind after SIGKILL of the test run: {left}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in children:  # a failed run's leftovers, by pid: this test started them
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
