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

    def set_override(self, camera_id: str, size: int | None) -> None:
        """`camera_id`'s configured size from its next resolution change on (None: by resolution);
        a camera added or changed live (its reader is opened anew, so its first frame is routed again)."""
        if size is None:
            self._overrides.pop(camera_id, None)
        else:
            self._overrides[camera_id] = size

    def add_sizes(self, sizes: Iterable[int]) -> None:
        """Route to `sizes` too (models added by a reload)."""
        self._sizes = tuple(sorted(set(self._sizes) | set(sizes)))

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
