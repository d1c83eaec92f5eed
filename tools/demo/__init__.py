"""The bundled demo: synthetic conveyor cameras over real RTSP into a real local Redis.

    .venv/bin/python tools/demo.py [--seconds N] [--verbose]     (the README's command)
    .venv/bin/python -m tools.demo [--seconds N] [--verbose]     (the same, from the repo root)
    .venv/bin/python -m tools.demo.plc                           (while it runs: the counts a PLC reads)

`run` is the demo (clips, servers, bridge, daemon, the status board; `main` is its entry point),
`preflight` what it checks before it starts anything, `view` the per-camera windows and board,
`parts` each camera's counting lines, belt speed and last crossing from its objects stream,
`scale` the cameras' `mm_per_px` from the synthetic scenes' scale, `plc` the OPC UA and Modbus
reader of the running demo's bridge.
Servers are started with tools/kit's launchers; clips are rendered by tools/kit/synth/video.py.
"""
