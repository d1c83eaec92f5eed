"""Tools for the tracking room (``daemon.tracking``).

- ``python -m tools.tracking.bench``: the tracker and line logic for 4 cameras x 50 parts, timed
  against ONNX Runtime inference in the same process (a ratio; goal <= 2 %).
- ``python -m tools.tracking.eval [--quick]``: the real daemon on rendered belts (speeds, densities,
  stop-and-go; file and RTSP sources; every frame and two thirds dropped) against the renderer's
  ground truth: crossings counted, parts counted twice, crossing-time error, HOTA and IDF1
  (report: tracking-eval.json in the run-output folder, tools/kit/run_output.py).
"""
