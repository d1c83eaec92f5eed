"""`python -m daemon.bridge -c beltsight.toml`: the bridge's CLI (see daemon.bridge.cli)."""

import sys

from daemon.bridge.cli import main

sys.exit(main())
