"""`python -m tools.docs [--check]`: regenerate the generated pages, or fail when one is stale."""

from __future__ import annotations

import argparse
import sys

from tools.docs import pages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.docs", description=__doc__)
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 when a generated page is stale")
    args = parser.parse_args(argv)
    if args.check:
        stale = pages.stale()
        for path in stale:
            print(f"stale: {path}", file=sys.stderr)
        if stale:
            print("regenerate with: python -m tools.docs", file=sys.stderr)
        return 1 if stale else 0
    for path in pages.write():
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
