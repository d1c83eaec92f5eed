"""Checks run on a host rather than in the test suite.

    python -m tools.checks.gpu_check --require-gpu --json gpu_check.json   (GPU host: GPU vs CPU path)
    python -m tools.checks.exports export|daemon|reference|table DIR       (third-party ONNX exports)

`gpu_thermal` is gpu_check's NVML section; `exports_ecosystem` (export) and `exports_reference` (the
ecosystems' own decoding) the torch / ecosystem side of `exports`; `exports_common` what both sides share
(manifest name, rendered frames).
"""
