"""The README's command for the bundled demo: runs `python -m tools.demo` (the tools/demo package).

    .venv/bin/python tools/demo.py [--seconds N] [--verbose] [--redis-port N] [--rtsp-port N] [--health-port N]

It replaces itself with this interpreter running the package, the repository root first on
PYTHONPATH, so it works from any directory; the options and the exit code are the package's.
"""

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

if __name__ == "__main__":
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]))
    os.execve(sys.executable, [sys.executable, "-P", "-m", "tools.demo", *sys.argv[1:]], env)
