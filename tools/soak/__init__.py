"""Soak test: the real daemon for N minutes against real servers while faults are injected.

    python -m tools.soak --minutes 30 [--cameras 2] [--out DIR] [--rebuild-every 500] [--no-plc] [--sentinel]

Starts, all on free loopback ports: one `tools/kit/rtsp_server.py` per camera (synthetic conveyor
clips from `tools.kit.synth.video.render_video`, 640x480 and 1280x720 at 10 fps, alternating), one
`redis-server` with AOF (`appendfsync always`), and the daemon as a subprocess
(`python -m daemon run -c <generated config>`, with `redis.spool_dir` on its own tmpfs,
`engine.rebuild.every_frames` set, and tracking on: a counting line across each belt with a
reject gate, its events on the objects stream). With the PLC (the default; `--no-plc` leaves it out)
it also starts, before the daemon, `beltsight bridge` as a subprocess on the same config (OPC UA,
security none, and Modbus on free loopback ports) and the PLC (`tools.soak.plc`, a process of its
own): an asyncua subscriber to the bridge's crossing events and count nodes, which reads the
bridge's event history after every (re)subscription for the crossings it missed meanwhile, and a
pymodbus poller reading every line's counts every `--poll-ms` (100). `--sentinel` runs Redis as a Sentinel group
(`tools/kit/sentinel.py`: master, replica, three sentinels; AOF on both servers), the daemon and
the bridge configured with `sentinels` / `sentinel_master`. A fault runs every `--fault-every-s`
seconds, cycling through:

    camera_kill    SIGKILL one camera's RTSP server, restart it on the same port 5 s later
    camera_stall   SIGSTOP one camera's RTSP server, SIGCONT 8 s later
    redis_kill     SIGKILL redis-server, restart it (same port, same AOF) 10 s later
    redis_oom      `maxmemory 1` (noeviction): every write refused with OOM for 15 s
    spool_disk_full  the spool's own 64 MiB tmpfs filled by a ballast file and Redis killed, 20 s
    http_flood     `--flood-connections` hostile clients on the health endpoint for 20 s (slow
                   senders, idle connections, oversized request lines, garbage; a separate
                   process, `tools.soak.flood.FloodProc`)
    bridge_kill    SIGKILL the bridge, start it again 5 s later on the same ports (with the PLC)
    redis_failover (--sentinel only, instead of redis_kill) SIGKILL the master (the 2nd, 4th, ... time
                   SENTINEL FAILOVER); 15 s later wait for the promoted replica, restart a killed master

The daemon runs with RLIMIT_NOFILE `--nofile` (default 1024, systemd's default soft limit), so
the default flood of 1500 connections is more than it has descriptors.

Every `--sample-s` seconds it samples the daemon's RSS (/proc/PID/status), open fds
(/proc/PID/fd), threads (/proc/PID/task), its /metrics (frames inferred / published /
dropped per camera) and how long a plain `GET /healthz` took (the verdict wants every one
answered within 1 s, floods included). At the end it sends SIGTERM (the daemon must exit 0), checks every stream
in Redis (no duplicate (camera, seq, captured_ms), entry IDs increasing with captured_ms) and every
objects stream (`tools.soak.checks`: no track new, ended or counted on a line twice, each line's
running count 1..N with no repeat, and no gap unless the daemon counted drops),
and, with the PLC, waits for both protocols to show the final counts, stops the PLC and the
bridge (which must exit 0) and checks what the PLC saw (`tools.soak.plc_checks`): every crossing
in the objects streams reached the OPC UA subscriber exactly once (by camera, line, direction and
count, with the same track id; each one missed attributed to a window without a session or not),
the final counts agree on both protocols with the streams, and no count ever went backwards. It
prints a table and a verdict, and writes `soak.json` (with a `plc` section) and `soak.png` to the
output directory (`--out`; default: soak-<time> in the run-output folder of tools/kit/run_output.py).

Verdict, over the measured window that starts at `--baseline-s` (default: after a 10-minute
warm-up, in which every fault kind has run three times and every session has been rebuilt; 40 %
of the run for runs shorter than twice that):
- RSS growth from the baseline (median of the window's first minute) to the end (median of the
  last minute) <= 2 %, and the RSS trend over the whole window (Theil-Sen slope: the median of
  all pairwise slopes, so rebuild and outage peaks do not tilt it) projects to <= 2 % too;
- fds and threads at the end no higher than their maximum in the baseline minute.
The warm-up is excluded because allocators and caches grow to a high-water mark the first times
each path runs (first rebuild of each session, first Redis outage backlog); a leak is what keeps
growing after that. `python -m tools.soak --minutes 40` measures 30 minutes after the warm-up.
Exit status 0 when every check passes, 1 otherwise.

Modules: `runner` (`Soak`: setup, faults, samples), `report` (the table rows, the end's report and
files), `verdict` (the end checks), `faults`
(the schedule, the OOM and full-spool faults), `procs` (the clips, the daemon's config, its start,
`kill_proc`), `bridge` (`PlcSide`: the bridge and the PLC processes), `plc` (the PLC, also
`python -m tools.soak.plc`), `plc_checks` (what it saw, judged), `flood` (the hostile HTTP clients,
also `python -m tools.soak.flood PORT N`), `stats` (/proc and /metrics readers, Theil-Sen).
Servers come from tools/kit's launchers.
"""
