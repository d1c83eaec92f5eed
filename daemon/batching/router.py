"""Which model size serves which camera.

The rule: the configured size nearest the longer side of the frame (416/640/800, ties go to
the larger), unless the camera's config names a size. Called from camera threads on every
resolution change, so a camera that reconnects at another resolution is re-routed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from daemon.core.frames import nearest_model_size


class ModelRouter:
    def __init__(self, available_sizes: Iterable[int], overrides: Mapping[str, int]) -> None:
        self._sizes = tuple(sorted(available_sizes))
        self._overrides = dict(overrides)

    @property
    def sizes(self) -> tuple[int, ...]:
        return self._sizes

    def __call__(self, camera_id: str, width: int, height: int) -> int | None:
        override = self._overrides.get(camera_id)
        if override is not None:
            return override if override in self._sizes else None
        if not self._sizes:
            return None
        return nearest_model_size(width, height, self._sizes)
