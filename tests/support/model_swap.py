"""`RecordingSwap`: a `ModelSwap` for tests of what sits above the swap (the models control, the models API)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from daemon.core.model_spec import ModelOverrides
from daemon.inference.swap import SwapError, Swapped


@dataclass
class RecordingSwap:
    """A `ModelSwap` that serves whatever it is given and records each call as (size, path,
    allow_new_classes, by); a path in `refuse`, or one whose name ends `.refused`, is refused (422)."""

    refuse: set[Path] = field(default_factory=set)
    calls: list[tuple[int, Path, bool, str]] = field(default_factory=list)

    async def swap(
        self,
        size: int,
        path: Path,
        *,
        allow_new_classes: bool = False,
        overrides: ModelOverrides | None = None,
        by: str = "api",
    ) -> Swapped:
        self.calls.append((size, path, allow_new_classes, by))
        if path in self.refuse or str(path).endswith(".refused"):
            raise SwapError(422, f"{path}: refused")
        return Swapped(size, "old.onnx", path.name, "v2", "ab" * 32, str(path), 0.01)
