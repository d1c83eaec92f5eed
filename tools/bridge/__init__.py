"""Tools for the bridge (daemon/bridge): the latency bench."""
