"""TensorRT engine and timing caches: where they live, what they were built for, their state.

ONNX Runtime's TensorRT provider loads whatever engine file it finds in
`trt_engine_cache_path`; an engine built for another model file, ONNX Runtime or TensorRT
version must not be loaded. So each (model file contents, ORT version, TensorRT version,
precision) gets its own directory under the cache root, named by that key, with a
`key.json` saying what it was built for; directories of the same model name with another key
are stale and removed when a session is prepared (`tensorrt_cache_stale`). A new key starts
empty, so TensorRT builds afresh (minutes), logged by `building` while it runs.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import dataclasses
import functools
import hashlib
import json
import os
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import onnxruntime as ort
import structlog

from daemon.config.engine import TensorRTOptions

log = structlog.get_logger("beltsight.engine")

KEY_FILE = "key.json"
PROGRESS_EVERY_S = 30.0
_NVINFER_NAMES = ("libnvinfer.so.10", "libnvinfer.so.11", "libnvinfer.so.8", "libnvinfer.so")


def state_directory() -> Path:
    """The daemon's state directory: systemd's `$STATE_DIRECTORY`, else the XDG state home."""
    systemd = os.environ.get("STATE_DIRECTORY")
    if systemd:
        return Path(systemd.split(":")[0])
    xdg = os.environ.get("XDG_STATE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".local" / "state") / "beltsight"


def cache_root(opts: TensorRTOptions) -> Path:
    return opts.cache_dir if opts.cache_dir is not None else state_directory() / "tensorrt"


@functools.cache
def tensorrt_version() -> str | None:
    """TensorRT's version as its library reports it (`getInferLibVersion`), None where not found."""
    try:
        import tensorrt  # type: ignore[import-not-found]  # noqa: PLC0415 - optional, pip's TensorRT

        return str(tensorrt.__version__)
    except ImportError:
        pass
    found = ctypes.util.find_library("nvinfer")
    for name in (found, *_NVINFER_NAMES) if found else _NVINFER_NAMES:
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        number = int(lib.getInferLibVersion())  # MAJOR * 10000 + MINOR * 100 + PATCH (TensorRT 10)
        return f"{number // 10000}.{number // 100 % 100}.{number % 100}"
    return None


@functools.lru_cache(maxsize=16)
def _digest(path: str, size: int, mtime_ns: int) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            sha.update(chunk)
    return sha.hexdigest()[:16]


def model_digest(model: Path) -> str:
    """The first 16 hex digits of the model file's SHA-256 (cached per size and mtime)."""
    st = model.stat()
    return _digest(str(model), st.st_size, st.st_mtime_ns)


@dataclass(frozen=True, slots=True)
class CacheKey:
    model: str
    digest: str
    ort: str
    tensorrt: str | None
    fp16: bool

    @property
    def name(self) -> str:
        precision = "fp16" if self.fp16 else "fp32"
        return f"{self.model}-{self.digest}-ort{self.ort}-trt{self.tensorrt or 'unknown'}-{precision}"

    def as_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def cache_key(opts: TensorRTOptions, model: Path) -> CacheKey:
    return CacheKey(model.stem, model_digest(model), ort.__version__, tensorrt_version(), opts.fp16)


@dataclass(frozen=True, slots=True)
class CacheState:
    """What is on disk for one model: its directory, whether it holds an engine, stale siblings."""

    directory: Path
    key: CacheKey
    engines: int
    stale: tuple[Path, ...]

    @property
    def ready(self) -> bool:
        return self.engines > 0

    def line(self) -> str:
        where = f"{self.directory}"
        if self.ready:
            text = f"built ({self.engines} engine file(s)) in {where}"
        else:
            text = f"not built yet: the first start builds it (minutes) into {where}"
        if self.key.tensorrt is None:
            text += "; TensorRT's version is unknown, so clear the cache after upgrading TensorRT"
        if self.stale:
            text += f"; {len(self.stale)} stale cache(s) of another model/ORT/TensorRT version to be removed"
        return text


def cache_state(opts: TensorRTOptions, model: Path) -> CacheState:
    root, key = cache_root(opts), cache_key(opts, model)
    directory = root / key.name
    engines = len(list(directory.glob("*.engine"))) if directory.is_dir() else 0
    stale = tuple(
        sorted(p for p in root.glob(f"{key.model}-*") if p.is_dir() and p.name != key.name and _is_cache(p, key.model))
    )
    return CacheState(directory, key, engines, stale)


def _is_cache(path: Path, model: str) -> bool:
    try:
        data = json.loads((path / KEY_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("model") == model


def prepare(opts: TensorRTOptions, model: Path) -> CacheState:
    """Make this key's directory (with its key.json) and remove stale ones; returns the state."""
    state = cache_state(opts, model)
    state.directory.mkdir(parents=True, exist_ok=True)
    (state.directory / KEY_FILE).write_text(json.dumps(state.key.as_dict(), indent=2), encoding="utf-8")
    for old in state.stale:
        shutil.rmtree(old, ignore_errors=True)
        log.warning("tensorrt_cache_stale", model=state.key.model, removed=str(old), key=state.key.name)
    return state


@contextlib.contextmanager
def building(state: CacheState) -> Iterator[None]:
    """Log `tensorrt_build` at the start and end of a session build that uses TensorRT, and
    `tensorrt_building` every PROGRESS_EVERY_S while it runs (a first build takes minutes)."""
    start = time.monotonic()
    log.info("tensorrt_build", model=state.key.model, cached=state.ready, directory=str(state.directory))
    done = threading.Event()

    def beat() -> None:
        while not done.wait(PROGRESS_EVERY_S):
            log.info("tensorrt_building", model=state.key.model, elapsed_s=round(time.monotonic() - start))

    ticker = threading.Thread(target=beat, name="tensorrt-progress", daemon=True)
    ticker.start()
    try:
        yield
    finally:
        done.set()
        ticker.join()
        log.info("tensorrt_built", model=state.key.model, seconds=round(time.monotonic() - start, 1))
