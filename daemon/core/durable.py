"""Small files replaced atomically and durably: the one helper for state kept on local disk.

`replace_durably(path, data)` writes a temporary file beside `path`, fsyncs it, renames it over
`path` and fsyncs the directory, so a power cut leaves the old file or the new one, never a mix or
an empty file. Used by the tracking state (`daemon/tracking/state.py`), the lines, models and
cameras drop-ins (`daemon/config/lines_dropin.py`, `models_dropin.py`, `cameras_dropin.py`) and the
Sparkplug bdSeq (`daemon/bridge/sparkplug_bdseq.py`).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def replace_durably(path: Path, data: bytes, mode: int | None = None) -> None:
    """Replace `path` with `data` (its folder created when missing; `mode`: its permission bits, set
    before the data is written); OSError when it cannot be written, with no temporary file left behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with tmp.open("wb") as f:
            if mode is not None:
                os.fchmod(f.fileno(), mode)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


__all__ = ["replace_durably"]
