"""BeltSight's tools: packages run from the repository root as `python -m tools.<package>`.

    common    the one free-port picker, redis-server and RTSP server launchers, daemon config writer
    demo      the bundled demo (`.venv/bin/python tools/demo.py`, the README's command)
    bench     throughput and latency of the daemon against the bare model and a naive loop
    soak      the daemon for N minutes under injected faults; leak and liveness verdict
    synth     synthetic conveyor scenes and H.264 clips with exact ground truth
    model     the demo detector: training, evaluation, fp16 / int8 conversion
    thermal   the governor on a simulated thermal plant (simulation, sweep)
    checks    host checks: the GPU pipeline, third-party ONNX exports through the daemon
    deploy    the systemd installer (tools/deploy/install-service.sh)
    bridge    the bridge's latency bench
    tracking  the tracker timed against inference

`tools/bootstrap.sh` (the environment) and `tools/demo.py` stay at those paths for the README.
Tools import the daemon and each other, never `tests` (tests/tools/test_layout.py checks it).
"""
