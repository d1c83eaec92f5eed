"""`python -m tools.synth images|video ...`: see tools/kit/synth/__init__.py."""

from __future__ import annotations

import argparse
from pathlib import Path

from tools.kit import synth
from tools.kit.synth.scene import write_images
from tools.kit.synth.video import render_video


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=synth.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("images", help="still images + COCO annotations.json (category ids 0..3)")
    a.add_argument("--out", type=Path, required=True)
    a.add_argument("--count", type=int, default=100)
    a.add_argument("--size", type=int, default=640)
    a.add_argument("--width", type=int)
    a.add_argument("--height", type=int)
    a.add_argument("--seed", type=int, default=0)
    v = sub.add_parser("video", help="H.264 MP4 + per-frame GT JSON")
    v.add_argument("--out", type=Path, required=True)
    v.add_argument("--gt", type=Path, required=True)
    v.add_argument("--size", default="1280x720", help="WxH")
    v.add_argument("--fps", type=int, default=10)
    v.add_argument("--seconds", type=float, default=5.0)
    v.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.cmd == "images":
        write_images(args.out, args.count, args.width or args.size, args.height or args.size, args.seed)
    else:
        w, h = (int(x) for x in args.size.lower().split("x"))
        render_video(args.out, args.gt, w, h, args.fps, args.seconds, args.seed)


main()
