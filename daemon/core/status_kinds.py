"""The status event kinds: every `kind` the daemon writes to `[redis] events_stream`, named once.

`StatusKind` is what `StatusEvent.kind` accepts (mypy refuses a kind not listed here), and
`STATUS_KINDS` says what each one means; the docs page of the events stream is generated from it
(`python -m tools.docs`), so the list a consumer reads cannot omit one.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

StatusKind = Literal[
    "camera_up",
    "camera_down",
    "camera_stalled",
    "camera_resolution_changed",
    "breaker_open",
    "breaker_closed",
    "session_rebuilt",
    "throttle_changed",
    "model_swapped",
    "model_swap_failed",
    "lines_changed",
]

STATUS_KINDS: Final[dict[StatusKind, str]] = {
    "camera_up": "the camera's stream opened (or reopened) and its first frame decoded (`detail`: size and "
    "codec, e.g. `1280x720 h264`)",
    "camera_down": "the camera's stream failed, ended or was stopped; `detail` is the reason (no secret)",
    "camera_stalled": "connected but no frame for the camera's stall timeout; it is reopened",
    "camera_resolution_changed": "the camera's frame size changed mid-stream (`detail`: `old -> new`); "
    "its model and lines follow the new size",
    "breaker_open": "a model's circuit breaker opened after consecutive failed batches on its provider: "
    "the model serves on the CPU until a probe batch succeeds (`detail`: why, the error, the next probe)",
    "breaker_closed": "the breaker closed again: the model is back on its provider",
    "session_rebuilt": "a model's ONNX Runtime session was rebuilt beside the serving one and took over",
    "throttle_changed": "the thermal governor changed the share of full speed (`detail`: JSON with the "
    "level, the reading and the limit)",
    "model_swapped": "a model file was swapped between two batches (`detail`: JSON with the size, the "
    "files and who asked)",
    "model_swap_failed": "a model swap was refused or failed its checks; the old model serves on "
    "(`detail`: JSON with the reason)",
    "lines_changed": "a camera's counting lines were changed live (`detail`: JSON with who and the lines "
    "before and after)",
}

__all__ = ["STATUS_KINDS", "StatusKind", "kinds"]


def kinds() -> tuple[StatusKind, ...]:
    """Every kind, in the order declared."""
    return get_args(StatusKind)
