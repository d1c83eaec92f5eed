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
    "camera_added",
    "camera_changed",
    "camera_removed",
    "count_mismatch",
    "count_agrees",
    "reference_down",
    "reference_up",
    "reference_wrapped",
    "reference_reset",
    "reference_jump",
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
    "camera_added": "a camera was added to the running daemon by the cameras API or a reload (`detail`: "
    "JSON with `user` and `changed`, the keys it was given; never a value)",
    "camera_changed": "a running camera's configuration changed (`detail`: JSON with `user` and `changed`, "
    "the names of the keys changed, never their values)",
    "camera_removed": "a camera was removed and drained: its frames already accepted were published "
    "(`detail`: JSON with `user`)",
    "count_mismatch": "written by `beltsight bridge`: a line's count drifted from the plant's own counter "
    "beyond its tolerance (`detail`: JSON with `line`, `direction`, `vision`, `reference`, `drift`, "
    "`allowed`, `window`)",
    "count_agrees": "written by `beltsight bridge`: the line's count agrees with the plant's counter again "
    "(`detail` as for `count_mismatch`)",
    "reference_down": "written by `beltsight bridge`: the plant counter a line is checked against cannot be "
    "read (never a mismatch)",
    "reference_up": "written by `beltsight bridge`: the plant counter answers again",
    "reference_wrapped": "written by `beltsight bridge`: the plant counter wrapped past its word size "
    "(counted on, never a mismatch)",
    "reference_reset": "written by `beltsight bridge`: the PLC reset its counter (counted on from the new "
    "value, never a mismatch)",
    "reference_jump": "written by `beltsight bridge`: the plant counter jumped forward faster than parts can "
    "pass (a preset; counted on from the new value)",
}

__all__ = ["STATUS_KINDS", "StatusKind", "kinds"]


def kinds() -> tuple[StatusKind, ...]:
    """Every kind, in the order declared."""
    return get_args(StatusKind)
