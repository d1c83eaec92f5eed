"""What every tool (and the test fixtures) starts its servers and configs with.

- `ports`: `free_port()`, the one free loopback port picker, and `port_in_use(port)`;
- `redis_server`: `RedisServer`, the one `redis-server` launcher (free or fixed port, AOF, ACL
  users, kill / freeze / thaw / stop / restart on the same port and data dir);
- `rtsp`: `RtspServer`, the one launcher of `tools/common/rtsp_server.py`, the GStreamer RTSP
  server script, which runs under Debian's `/usr/bin/python3` (a venv cannot import gi):

      /usr/bin/python3 tools/common/rtsp_server.py --port 0 --stream cam0=clip.mp4

- `daemon_config`: `write_config(...)`, the one writer of daemon TOML configs (the committed
  demo models, CPU provider unless overridden), and `MODELS`.

Imported by tools/demo, tools/bench, tools/soak and tests/support; it imports only the daemon's
published pieces it needs and never `tests`.
"""
