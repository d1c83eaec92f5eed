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
for the result (a `Popen` object works from any thread). The child also checks, after the prctl,
that its parent is still the process that forked it: a parent that died just before would never
signal, so the child exits at once instead.

`preexec_fn` runs Python between fork and exec, which CPython calls unsafe with threads (a lock
held by another thread at the fork stays held in the child). The function here only calls two
system calls through a ctypes handle loaded beforehand and `os._exit`: it takes no lock, imports
nothing and allocates nothing of its own. Off Linux, `spawn` is plain `Popen`.
"""

from __future__ import annotations

import ctypes
import os
import queue
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
    the leash is set (keep it to system calls: it runs between fork and exec)."""
    if _LIBC is None:
        return subprocess.Popen(argv, preexec_fn=preexec, **popen)  # noqa: PLW1509
    hook = die_with_parent(os.getpid(), preexec)
    return _on_kit_thread(lambda: subprocess.Popen(argv, preexec_fn=hook, **popen))  # noqa: PLW1509


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
