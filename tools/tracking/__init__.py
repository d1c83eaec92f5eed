"""Tools for the tracking room (``daemon.tracking``).

- ``python -m tools.tracking.bench``: the tracker and line logic for 4 cameras x 50 parts, timed
  against ONNX Runtime inference in the same process (a ratio; goal <= 2 %).
- ``python -m tools.tracking.eval [--quick]``: the real daemon on rendered belts (speeds, densities,
  stop-and-go; file and RTSP sources; every frame and two thirds dropped) against the renderer's
  ground truth: crossings counted, parts counted twice, crossing-time error, HOTA and IDF1
  (report: tracking-eval.json in the run-output folder, tools/kit/run_output.py).

The evaluation's parts: ``clips`` (rendered and cached), ``daemon_run`` (the daemon run, what it published),
``scoring`` (one clip against its GT, pooled, the goals) over ``metrics`` (crossing matching, IDF1, HOTA);
``eval`` the scenarios, the modes and the report.
"""
