"""The kit: what the tests import, and what every tool starts its servers, configs and scenes with.

- `ports`: `free_port()`, the one free loopback port picker, and `port_in_use(port)`;
- `sentinel`: `start_group`, a master, replica and three sentinels (`SentinelGroup`);
- `redis_server`: `RedisServer`, the one `redis-server` launcher (free or fixed port, AOF, ACL
  users, kill / freeze / thaw / stop / restart on the same port and data dir);
- `rtsp`: `RtspServer`, the one launcher of `tools/kit/rtsp_server.py`, the GStreamer RTSP
  server script, which runs under Debian's `/usr/bin/python3` (a venv cannot import gi):

      /usr/bin/python3 tools/kit/rtsp_server.py --port 0 --stream cam0=clip.mp4

- `running`: the one way a tool starts the daemon for a measurement: `start_daemon(config)` in this
  process on a thread (the benches), `spawn_daemon(config, log)` as a process of its own (the soak,
  the tracking eval, the live-view bench), `stop_process` (SIGTERM, then SIGKILL; the demo's too);
- `daemon_config`: `write_config(...)`, the one writer of daemon TOML configs (the committed
  demo models, CPU provider unless overridden), and `MODELS`;
- `run_output`: `reports_dir()` and `run_dir(name)`, where every tool writes its reports, plots and
  logs by default: `$BELTSIGHT_REPORTS_DIR`, else `~/.local/state/beltsight/reports`, never the repository;
- `plc_clients`: what a PLC does to the bridge, once: OPC UA look-ups (`node`, `event_type`,
  `vision_system`), the `Arrivals` subscription handler, the Modbus block read and poll, the benches'
  `crossing_fields` and `bench_bridge` (the bridge in-process for a measurement);
- `stats`: `percentile` (linear interpolation, q in 0..100, in the unit of the values) and `Summary`
  (n, p50, p99, mean, max), the one percentile every bench, soak, eval and the demo report;
- `synth`: the procedural conveyor scenes and H.264 clips with exact ground truth (`render_scene`,
  `render_video`, `render_cached`: rendered where missing, `h264_writer`); its command line is
  `python -m tools.synth`.

Imported by tests/support and the tests, by the operators' tools (tools/demo) and by the lab
(tools/bench, tools/soak, tools/model, tools/tracking, tools/checks, tools/bridge). It imports only the
daemon's published pieces it needs, never another tools package and never `tests`.
"""
