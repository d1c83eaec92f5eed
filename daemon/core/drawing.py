"""How boxes look wherever the daemon draws them (the live view, crossing snapshots): one colour
per class and one outline width, so a part looks the same on the page and in its snapshot."""

from __future__ import annotations

BOX_WIDTH = 3
"""Outline width of a drawn box, in pixels."""
PALETTE: tuple[tuple[int, int, int], ...] = (
    (255, 0, 255),
    (0, 255, 255),
    (255, 255, 0),
    (255, 128, 0),
    (0, 255, 0),
    (255, 0, 0),
    (0, 128, 255),
    (255, 255, 255),
)
"""Box colours (RGB), chosen by class id: see `class_colour`."""


def class_colour(cls: int) -> tuple[int, int, int]:
    """The RGB colour boxes of class `cls` are drawn in: `PALETTE[cls % len(PALETTE)]`."""
    return PALETTE[cls % len(PALETTE)]


__all__ = ["BOX_WIDTH", "PALETTE", "class_colour"]
