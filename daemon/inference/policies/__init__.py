"""The serving engine's policies (`daemon.inference.serving.ServingEngine` owns one of each per
session role): when to rebuild a session (`rebuild.RebuildPolicy`) and when to stop trusting
the primary provider (`breaker.BreakerPolicy`). They decide; the serving engine builds, swaps
and closes sessions. May import `daemon.core` and `daemon.config`."""
