"""tools/kit/leash.py and the prefixes that replaced `preexec_fn`: a spawned child asks for SIGKILL at its
parent's death without Python running between fork and exec, a missing command fails in the parent as
`Popen` fails, and `with_nofile` starts a command with its descriptor limit."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tools.kit import leash
from tools.kit.running import with_nofile

PDEATHSIG = "import ctypes, signal; s = ctypes.c_int(); ctypes.CDLL(None).prctl(2, ctypes.byref(s)); print(s.value)"
"""The child's parent-death signal (`prctl(PR_GET_PDEATHSIG)`)."""
LOCAL = threading.local()
REPO = Path(__file__).resolve().parents[3]


@pytest.mark.skipif(leash.SETPRIV is None, reason="util-linux setpriv not installed")
def test_a_spawned_child_has_the_parent_death_signal_from_setpriv() -> None:
    got = leash.run([sys.executable, "-c", PDEATHSIG], timeout=60, text=True)
    assert got.returncode == 0, got.stderr
    assert int(got.stdout) == 9  # SIGKILL


def test_a_caller_preexec_still_gets_the_leash() -> None:
    """In a fresh interpreter: the `preexec_fn` path keeps the hazard the module's docstring tells of, and
    this test process has kept per-thread reformatters by now."""
    script = (
        "import subprocess, sys\n"
        "from tools.kit import leash\n"
        f"with leash.spawn([sys.executable, '-c', {PDEATHSIG!r}], preexec=lambda: None, stdout=subprocess.PIPE) as p:\n"
        "    print(int(p.communicate(timeout=60)[0]))\n"
    )
    argv = [sys.executable, "-c", script]
    got = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=120, cwd=REPO)
    assert got.returncode == 0, got.stderr
    assert int(got.stdout) == 9


def test_a_missing_command_raises_in_the_parent_as_popen_does(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        leash.spawn(["beltsight-no-such-command"])
    with pytest.raises(FileNotFoundError):
        leash.spawn(["./no-such-file"], cwd=tmp_path)
    with pytest.raises(FileNotFoundError):  # looked up in the child's PATH, as Popen does
        leash.spawn(["python3"], env={"PATH": str(tmp_path)})


def test_spawning_while_another_thread_keeps_a_video_reformatter_does_not_hang() -> None:
    """The hang that moved the leash off `preexec_fn`: a reformatter with swscale's slice threads (PyAV's
    default since 17) kept in another thread's `threading.local`, as the daemon keeps its scalers,
    while a process is spawned. With a `preexec_fn` the child freed it and waited for those threads."""
    av = pytest.importorskip("av")
    kept, done = threading.Event(), threading.Event()

    def keep() -> None:
        LOCAL.reformatter = av.video.reformatter.VideoReformatter()
        LOCAL.reformatter.reformat(av.VideoFrame(1280, 720, "yuv420p"), 800, 450, "rgb24")
        kept.set()
        done.wait(60)

    thread = threading.Thread(target=keep)
    thread.start()
    try:
        assert kept.wait(30)
        got = leash.run([sys.executable, "-c", "print('up')"], timeout=60, text=True)
        assert got.stdout.strip() == "up"
    finally:
        done.set()
        thread.join(30)


def test_with_nofile_starts_the_command_with_that_descriptor_limit() -> None:
    got = subprocess.run(
        [*with_nofile(77), sys.executable, "-c", "import resource; print(resource.getrlimit(resource.RLIMIT_NOFILE))"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert got.stdout.strip() == "(77, 77)"
