"""The bundled demo: synthetic conveyor cameras over real RTSP into a real local Redis.

    .venv/bin/python tools/demo.py [--seconds N] [--verbose]     (the README's command)
    .venv/bin/python -m tools.demo [--seconds N] [--verbose]     (the same, from the repo root)
    .venv/bin/python -m tools.demo.plc                           (while it runs: the counts a PLC reads)

`run` is the demo (its config and ports, the order things start and stop; `main` is its entry point),
`procs` its processes (started, waited for until READY, watched, stopped), `watch` the streams read
and shown as the status board, and the checks that make the demo its own test,
`preflight` what it checks before it starts anything, `view` the per-camera windows and board,
`parts` each camera's counting lines, belt speed and last crossing from its objects stream,
`scale` the cameras' `mm_per_px` from the synthetic scenes' scale, `plc` the OPC UA and Modbus
reader of the running demo's bridge.
Servers are started with tools/kit's launchers; clips are rendered by tools/kit/synth/video.py.
"""
