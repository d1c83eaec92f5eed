"""Children on a leash: every process the kit starts dies with the process that started it.

`spawn(argv, **popen_kwargs)` is `subprocess.Popen` whose child asks Linux for SIGKILL when its
parent dies (`prctl(PR_SET_PDEATHSIG, SIGKILL)`, set between fork and exec; it survives the exec).
A test run killed with SIGKILL (pytest-timeout's last resort, an OOM kill, a CI job cancelled)
therefore leaves no `redis-server`, RTSP server, mosquitto, bridge or daemon child behind; a run
that ends normally still stops its servers itself, as before.

Linux sends the signal when the *thread* that forked the child ends, not the process. Servers are
started and restarted from worker threads too (`asyncio.to_thread`, fault-injection threads, an
asyncio loop's executor) that end long before the server should, so every `spawn` forks on one kit
thread that lives as long as the process: the calling thread hands it the `Popen` call and waits
for the result (a `Popen` object works from any thread).

The signal is asked for by `setpriv --pdeathsig KILL` (util-linux, essential on Debian and Ubuntu),
which sets it and execs the command in the same process: no Python runs between fork and exec.
A `preexec_fn` would: with one, CPython calls `PyOS_AfterFork_Child` in the child, which clears
every other thread's state there and so runs the deallocators of what only those threads held,
their `threading.local` values among them. A PyAV `VideoReformatter` with swscale slice threads,
kept per thread as `daemon.ingest.decoding` keeps its scalers, was freed that way in the child of
`test_pipeline_accuracy_matches_the_model_run_offline`, and swscale's `avpriv_slicethread_free`
waited forever for threads that exist only in the parent: the child never reached exec and the
test hung until pytest-timeout (first seen with av 18.1.1; `tests/unit/support/test_leash.py`
reproduces it). Without `setpriv`, or for a caller's own `preexec` (keep it to system calls),
`spawn` falls back to a `preexec_fn` that sets the signal with `prctl` and checks that the parent is still the one that
forked it (a parent that died just before would never signal); that path keeps the hazard above.
`setpriv` cannot check the parent: a process killed in the microseconds between the fork and
`setpriv`'s `prctl` leaves that one child without a leash. Off Linux, `spawn` is plain `Popen`.
"""

from __future__ import annotations

import ctypes
import errno
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")

PR_SET_PDEATHSIG = 1

_LIBC: Any = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None
SETPRIV = shutil.which("setpriv") if sys.platform == "linux" else None
"""util-linux's `setpriv`, which sets the parent-death signal and execs the command (see the module's
docstring); None where it is missing."""
_jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = queue.SimpleQueue()
_lock = threading.Lock()
_thread: threading.Thread | None = None


def _serve() -> None:
    while True:
        call, result = _jobs.get()
        if not result.set_running_or_notify_cancel():
            continue
        try:
            result.set_result(call())
        except BaseException as exc:  # handed back to the caller's thread, raised there
            result.set_exception(exc)


def _on_kit_thread(call: Callable[[], T]) -> T:
    global _thread  # noqa: PLW0603  (one forking thread per process, started on first use)
    with _lock:
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_serve, name="kit-spawner", daemon=True)
            _thread.start()
    if threading.current_thread() is _thread:
        return call()
    result: Future[T] = Future()
    _jobs.put((call, result))
    return result.result()


def die_with_parent(parent_pid: int, then: Callable[[], None] | None = None) -> Callable[[], None]:
    """A `preexec_fn`: SIGKILL this child when `parent_pid` (the forking thread) dies; then `then`."""

    def preexec() -> None:
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died before the prctl: nobody would signal
            os._exit(1)
        if then is not None:
            then()

    return preexec


def spawn(argv: Sequence[str], *, preexec: Callable[[], None] | None = None, **popen: Any) -> subprocess.Popen[Any]:
    """`subprocess.Popen(argv, **popen)` whose child dies with this process; `preexec` runs after
    the leash is set (keep it to system calls: it runs between fork and exec). A command that is not
    found raises `FileNotFoundError` here, as `Popen` does, not in the child."""
    if _LIBC is None:
        return subprocess.Popen(argv, preexec_fn=preexec, **popen)  # noqa: PLW1509
    if preexec is None and SETPRIV is not None and "executable" not in popen:
        _must_exist(argv[0], popen)
        leashed = [SETPRIV, "--pdeathsig", "KILL", "--", *argv]
        return _on_kit_thread(lambda: subprocess.Popen(leashed, **popen))
    hook = die_with_parent(os.getpid(), preexec)
    return _on_kit_thread(lambda: subprocess.Popen(argv, preexec_fn=hook, **popen))  # noqa: PLW1509


def _must_exist(command: str | os.PathLike[str], popen: dict[str, Any]) -> None:
    """FileNotFoundError, as `Popen` raises it, where the child could not exec `command`: looked up in
    the child's PATH (`env`'s, else ours) where it names no directory, else relative to `cwd`."""
    name = os.fspath(command)
    if os.sep in name:
        found = os.path.exists(os.path.join(os.fspath(popen.get("cwd") or "."), name))
    else:
        env = popen.get("env")
        found = shutil.which(name, path=(env if env is not None else os.environ).get("PATH", os.defpath)) is not None
    if not found:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), name)


def run(argv: Sequence[str], *, timeout: float | None = None, **popen: Any) -> subprocess.CompletedProcess[Any]:
    """`subprocess.run(argv, capture_output=True, check=False, ...)` through `spawn`: killed on timeout
    (`subprocess.TimeoutExpired`, as `run` raises it) and with this process."""
    with spawn(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise
    return subprocess.CompletedProcess(list(argv), proc.returncode, out, err)


__all__ = ["die_with_parent", "run", "spawn"]
