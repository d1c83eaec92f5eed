"""The bundled demo: synthetic conveyor cameras over real RTSP into a real local Redis.

    .venv/bin/python tools/demo.py [--seconds N] [--verbose]     (the README's command)
    .venv/bin/python -m tools.demo [--seconds N] [--verbose]     (the same, from the repo root)

`run` is the demo (clips, servers, daemon, the status board; `main` is its entry point),
`preflight` what it checks before it starts anything, `view` the per-camera windows and board.
Servers are started with tools/common's launchers; clips are rendered by tools/synth/video.py.
"""
