"""Procedural renderer of conveyor-belt scenes with exact ground truth.

Everything is deterministic by seed (numpy ``default_rng`` + PIL drawing, no global state).

Classes (ids 0..3, shape differs, colour/material is random and independent of class)::

    0 bolt       hex-head bolt lying flat: narrow shaft + wider head
    1 hex_nut    hexagon with a round hole
    2 washer     flat ring (round outline, round hole)
    3 l_bracket  L-shaped angle bracket with mounting holes

Part size ("length" = longest dimension) is a fraction of the frame's LONGER side (6 %..20 % by default),
so a camera frame of any resolution, letterboxed to a model size, shows parts at a similar fraction of the
model input.  Ground-truth boxes are the tight box of the part's visible pixels (computed from the rendered,
occlusion- and frame-clipped alpha mask, threshold 0.5), in pixel-edge coordinates: a part covering pixel
columns 10..19 has x1=10, x2=20.  Parts with less than ``MIN_VISIBLE`` of their area visible get no label.

CLI (tools/synth/__main__.py)::

    python -m tools.synth images --out DIR --count N --size S --seed K [--width W --height H]
        -> DIR/000000.jpg ... + DIR/annotations.json (COCO; category ids 0..3, bbox [x, y, w, h])
    python -m tools.synth video --out clip.mp4 --gt clip.json --size WxH --fps F --seconds T --seed K
        -> H.264 MP4 (libx264, yuv420p, no B-frames, GOP = fps) + per-frame GT JSON (camera pixels, xyxy)

Modules: ``belt`` (belt texture, lighting), ``parts`` (the classes, part shapes and placement), ``scene``
(compositing, camera effects; ``render_image``, ``render_scene``), ``video`` (``render_video``, ``render_cached``,
``h264_writer``).
"""
