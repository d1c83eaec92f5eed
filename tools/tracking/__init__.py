"""Tools for the tracking room (``daemon.tracking``): ``python -m tools.tracking.bench`` times it against inference."""
