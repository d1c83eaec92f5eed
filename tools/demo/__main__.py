"""`python -m tools.demo`: see tools/demo/run.py."""

import sys

from tools.demo.run import main

sys.exit(main())
