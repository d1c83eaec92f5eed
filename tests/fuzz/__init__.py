"""Property-based (Hypothesis) fuzzing of what reads untrusted input, each against an oracle: the
config loader (valid configs drawn from the models load and round-trip through `check-config`), the
bridge's objects-stream parser, the spool reader, the HTTP endpoint (`401` on every protected route
without credentials, the browser guard's answers, the lines, models and cameras API bodies, snapshot and clip paths),
the bridge's Modbus and OPC UA ports, and its Machine Vision methods.

Each test says what must hold for every input (a clean refusal or the right answer, never an
exception that escapes, never a hung server). Profiles live in tests/conftest.py: `dev` (random,
failures replayed from .hypothesis/) and `ci` (chosen when `CI` is set: a fresh seed each run,
printed, and the command that replays a failure with `--hypothesis-seed=N` printed under it).
"""
