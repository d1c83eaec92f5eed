"""Property-based (Hypothesis) fuzzing of what reads untrusted input: the config loader, the bridge's
objects-stream parser, the spool reader, the HTTP endpoint and the bridge's Modbus and OPC UA ports.

Each test says what must hold for every input (a clean refusal or the right answer, never an
exception that escapes, never a hung server). Profiles live in tests/conftest.py: `dev` (random)
and `ci` (derandomized, chosen when `CI` is set) so a CI run is reproducible.
"""
