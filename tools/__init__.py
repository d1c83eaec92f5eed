"""BeltSight's tools: packages run from the repository root as `python -m tools.<package>`, in three groups.

The kit (what the tests import; every tool builds on it):
    kit       free ports, the redis-server and RTSP server launchers, the daemon config writer, and
              `kit.synth`, the synthetic conveyor scenes and H.264 clips with exact ground truth

What operators run:
    demo      the bundled demo (`.venv/bin/python tools/demo.py`, the README's command)
    deploy    the systemd installer (tools/deploy/install-service.sh)
    synth     `python -m tools.synth images|video`: synthetic scenes and clips written to disk

The lab (training, evaluations, benches, soak):
    model     the demo detector: training, evaluation, fp16 / int8 conversion
    tracking  the tracker scored on synthetic clips (`tracking.eval`) and timed against inference
    bench     throughput and latency of the daemon against the bare model and a naive loop
    soak      the daemon for N minutes under injected faults; leak and liveness verdict
    thermal   the governor on a simulated thermal plant (simulation, sweep)
    checks    host checks: the GPU pipeline, third-party ONNX exports through the daemon
    bridge    the bridge's latency bench

`tools/bootstrap.sh` (the environment) and `tools/demo.py` stay at those paths for the README.
Imports go kit <- operators and lab; the kit imports no other tools package, and no tool imports
`tests` (tests/tools/test_layout.py checks both). Tests import the kit, and the lab modules they check.
"""
