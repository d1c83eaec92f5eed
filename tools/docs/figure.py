"""Put a run's figure into the docs: `docs/reports/img/NAME`, under 200 KB.

    python -m tools.docs.figure RUN/soak.png soak-plc-sentinel-150min.png
    python -m tools.docs.figure /tmp/flame.svg flame-4cam-640.svg

The tools write their plots to the run-output folder (tools/kit/run_output.py), never into the
repository; the docs show a curated copy, made by this command, beside the command that made the
plot. A PNG is stored with a palette of 128 colours (a matplotlib plot looks the same and weighs a
third); an SVG is copied as it is. A result of `LIMIT` bytes or more is refused (not written):
render it smaller, or leave it out and name the command that makes it.
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

from PIL import Image

from tools.docs.discover import ROOT

FIGURES = ROOT / "docs" / "reports" / "img"
LIMIT = 200 * 1024
COLOURS = 128


def shrunk(source: Path) -> bytes:
    """The figure's bytes as the docs keep them: a PNG quantised to `COLOURS`, an SVG as it is."""
    if source.suffix.lower() == ".svg":
        return source.read_bytes()
    if source.suffix.lower() != ".png":
        raise ValueError(f"{source.name}: a figure is a .png or an .svg")
    with Image.open(source) as image:
        quantised = image.convert("RGB").quantize(
            colors=COLOURS, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE
        )
    out = io.BytesIO()
    quantised.save(out, "PNG", optimize=True)
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.docs.figure", description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path, help="the plot a tool wrote (.png or .svg)")
    parser.add_argument("name", nargs="?", help="its file name under docs/reports/img (default: the source's)")
    args = parser.parse_args(argv)
    name = args.name or args.source.name
    if Path(name).suffix.lower() != args.source.suffix.lower():
        parser.error(f"{name}: keep the source's suffix ({args.source.suffix})")
    try:
        data = shrunk(args.source)
    except (OSError, ValueError) as exc:
        parser.error(str(exc))
    if len(data) >= LIMIT:
        print(
            f"{args.source}: {len(data)} bytes as a figure, the docs take under {LIMIT}: not written", file=sys.stderr
        )
        return 1
    target = FIGURES / name
    target.write_bytes(data)
    print(f"wrote {target.relative_to(ROOT)} ({len(data)} bytes; {args.source.stat().st_size} before)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
