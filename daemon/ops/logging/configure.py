"""structlog set-up: JSON lines for journald, a console renderer on a terminal, one pipeline for all.

Only the CLI (and tools) call `configure_logging`. Every line has an `event` name (catalogued in
`daemon.ops.logging.catalogue`); stages bind `camera=<id>` where there is one.

- structlog's events and the standard `logging` module's records (asyncio, redis-py, Python warnings
  through `logging.captureWarnings`, FFmpeg through PyAV when enabled) go through the same
  `structlog.stdlib.ProcessorFormatter` on one handler, so each is one JSON object per line (or one
  console line). A library record becomes event `library_log` with its text in `message`; a run of
  records from one library logger is capped (`suppressed` counts what was left out).
- A traceback is a field (`exception`: a list of dicts in JSON, text in the console), never raw lines.
- Secrets: every value is scrubbed before rendering, and the final rendered line is scrubbed again
  (URL passwords and every value in `daemon.core.redaction.SECRETS`), in every format.
- Uncaught exceptions (main thread and other threads) are logged as `unhandled_exception` once
  `capture_uncaught()` installed the hooks (`beltsight run` does).
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections.abc import Callable, MutableMapping
from types import TracebackType
from typing import Any, TextIO

import structlog
from structlog.stdlib import ProcessorFormatter
from structlog.tracebacks import ExceptionDictTransformer

from daemon.core.clock import SYSTEM_CLOCK, Clock
from daemon.core.redaction import SECRETS
from daemon.ops.logging.event import LIBRARY_EVENT

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}
LIBRARY_BURST = 20
"""At most this many records per library logger in `LIBRARY_WINDOW_S`; the rest are counted."""
LIBRARY_WINDOW_S = 10.0

Processor = Callable[[Any, str, MutableMapping[str, Any]], Any]
log = structlog.get_logger("beltsight.logs")


def _scrub_value(value: Any) -> Any:
    if isinstance(value, str):
        return SECRETS.scrub(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_scrub_value(v) for v in value)
    if isinstance(value, dict):
        return {k: _scrub_value(v) for k, v in value.items()}
    if isinstance(value, BaseException):
        return SECRETS.scrub(f"{type(value).__name__}: {value}")
    return value


def scrub_secrets(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor: redact secrets in every value (after tracebacks became fields)."""
    for key, value in event_dict.items():
        if not key.startswith("_"):  # structlog's own `_record` / `_from_structlog`
            event_dict[key] = _scrub_value(value)
    return event_dict


class RedactedRenderer:
    """Wrap a renderer: scrub the final line too, so nothing a renderer adds can leak a secret.

    In JSON a replacement must not break the object; if it would (a secret spanning JSON syntax),
    the line is re-rendered from its parsed, scrubbed values (or withheld but for its event name)."""

    def __init__(self, renderer: Processor, *, is_json: bool) -> None:
        self._renderer = renderer
        self._is_json = is_json

    def __call__(self, logger: Any, method: str, event_dict: MutableMapping[str, Any]) -> str:
        line = str(self._renderer(logger, method, event_dict))
        clean = SECRETS.scrub(line)
        if clean == line or not self._is_json:
            return clean
        try:
            json.loads(clean)
        except ValueError:
            data = _scrub_value(json.loads(line))
            clean = json.dumps(data, default=str)
            if SECRETS.scrub(clean) != clean:  # the secret is in the syntax itself: keep only the name
                clean = json.dumps({"event": data.get("event"), "level": data.get("level"), "withheld": True})
        return clean


def _library_event(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """foreign_pre_chain: a standard-library record's text goes to `message`, its event is `library_log`."""
    event_dict["message"] = event_dict.get("event")
    event_dict["event"] = LIBRARY_EVENT
    return event_dict


class LibraryFilter(logging.Filter):
    """Lets every structlog record through; library records need `min_level`, and at most
    `LIBRARY_BURST` per logger per window pass (the next one to pass carries `suppressed=n`)."""

    def __init__(self, min_level: int, clock: Clock = SYSTEM_CLOCK) -> None:
        super().__init__()
        self._min_level = min_level
        self._clock = clock
        self._lock = threading.Lock()
        self._windows: dict[str, tuple[float, int, int]] = {}  # logger -> (start, passed, suppressed)

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, dict):  # from structlog: already filtered by level
            return True
        if record.levelno < self._min_level:
            return False
        now = self._clock.monotonic()
        with self._lock:
            start, passed, suppressed = self._windows.get(record.name, (now, 0, 0))
            if now - start >= LIBRARY_WINDOW_S:
                start, passed = now, 0
            if passed >= LIBRARY_BURST:
                self._windows[record.name] = (start, passed, suppressed + 1)
                return False
            self._windows[record.name] = (start, passed + 1, 0)
        if suppressed:
            record.suppressed = suppressed
        return True


def _renderer(use_console: bool, colors: bool) -> list[Processor]:
    if use_console:
        return [
            structlog.processors.format_exc_info,  # the traceback as text in `exception`, scrubbed below
            scrub_secrets,
            RedactedRenderer(structlog.dev.ConsoleRenderer(colors=colors), is_json=False),
        ]
    return [
        structlog.processors.ExceptionRenderer(ExceptionDictTransformer(show_locals=False, use_rich=False)),
        scrub_secrets,
        RedactedRenderer(structlog.processors.JSONRenderer(default=str), is_json=True),
    ]


def _shared() -> list[Processor]:
    return [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
    ]


def configure_logging(fmt: str = "auto", level: str = "info", stream: TextIO | None = None) -> None:
    """Route structlog and the standard library through one handler on `stream` (stdout by default)."""
    out = stream if stream is not None else sys.stdout
    use_console = fmt == "console" or (fmt == "auto" and out.isatty())
    formatter = ProcessorFormatter(
        foreign_pre_chain=[*_shared(), _library_event, structlog.stdlib.ExtraAdder(allow=("suppressed",))],
        processors=[ProcessorFormatter.remove_processors_meta, *_renderer(use_console, out.isatty())],
    )
    handler = logging.StreamHandler(out)
    handler.setFormatter(formatter)
    handler.addFilter(LibraryFilter(max(_LEVELS[level], logging.WARNING)))
    handler.set_name("beltsight")
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == "beltsight"]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(_LEVELS[level])
    logging.captureWarnings(True)
    structlog.configure(
        processors=[*_shared(), ProcessorFormatter.wrap_for_formatter],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level]),
        logger_factory=structlog.stdlib.LoggerFactory(),
        cache_logger_on_first_use=False,
    )
    _capture_ffmpeg(level == "debug")


def _capture_ffmpeg(enabled: bool) -> None:
    """FFmpeg's own messages: PyAV keeps them off by default (nothing reaches stderr raw). At debug
    level they are routed into `logging` (loggers `libav.*`), repeats collapsed; PyAV warns that its
    log callback can contend or deadlock with many decoding threads, so it stays off otherwise."""
    import av.logging  # noqa: PLC0415 - only the daemon's processes need it

    if enabled:
        av.logging.set_skip_repeated(True)
        av.logging.set_level(av.logging.WARNING)
    else:
        av.logging.set_level(None)


_saved_hooks: list[tuple[Any, Any]] = []


def capture_uncaught() -> None:
    """Log exceptions nobody caught (main thread, other threads) as `unhandled_exception`.

    Process-wide hooks: `beltsight run` installs them; `reset_logging` puts the previous ones back."""
    if not _saved_hooks:
        _saved_hooks.append((sys.excepthook, threading.excepthook))
    sys.excepthook = _log_uncaught
    threading.excepthook = _log_thread_uncaught


def quiet_native_loggers() -> None:
    """ONNX Runtime's C++ logger writes straight to stderr, past this pipeline: keep it to errors
    (which also reach Python as exceptions, logged as JSON); its warnings would be raw lines."""
    import onnxruntime  # noqa: PLC0415 - heavy; only `beltsight run` needs it

    onnxruntime.set_default_logger_severity(3)


def _log_uncaught(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    if issubclass(kind, KeyboardInterrupt):
        sys.__excepthook__(kind, exc, tb)
        return
    log.critical("unhandled_exception", thread="MainThread", exc_info=(kind, exc, tb))


def _log_thread_uncaught(args: threading.ExceptHookArgs) -> None:
    if args.exc_value is None or isinstance(args.exc_value, SystemExit):
        return
    name = args.thread.name if args.thread is not None else "?"
    log.critical("unhandled_exception", thread=name, exc_info=(args.exc_type, args.exc_value, args.exc_traceback))


def reset_logging() -> None:
    """Undo `configure_logging` (tests): structlog defaults, no handler, hooks restored."""
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == "beltsight"]:
        root.removeHandler(old)
    logging.captureWarnings(False)
    if _saved_hooks:
        sys.excepthook, threading.excepthook = _saved_hooks.pop()
    structlog.reset_defaults()
