"""Throughput and latency of the real daemon, against the bare model and the naive pipeline.

    .venv/bin/python -m tools.bench [--cameras 4] [--fps 15] [--size 640x480] [--bitrate 1M] [--seconds 60]
        [--model 640|FILE.onnx] [--max-batch N] [--max-wait-ms M] [--workers W] [--worker-batch B] [--sweep 1,2,4,6]
        [--naive-seconds S] [--stage-ab-seconds 10] [--ab EXPERIMENT] [--no-lines] [--snapshots]
        [--flame FILE.svg] [--scaling 1,2,4,8,16] [--preprocess host|graph] [--ultralytics PYTHON] [--out DIR]
        [--settle 15] [--rtsp-nice -10]
    .venv/bin/python -m tools.bench --null-model [--cameras 8,16,24,32] [--seconds 20] [--preprocess host|graph|both]
        [--boxes 7] [--gil] [--ab EXPERIMENT] [--processes 1,auto] [--lanes gpu,device] [--ultralytics PYTHON]
        [--flame FILE.svg|FILE.txt] [--settle 15] [--rtsp-nice -10]

1. renders K synthetic clips (cached in runs/bench-cache), starts redis-server and tools/kit/rtsp_server.py
   (its threads at --rtsp-nice, -10 where the bench may: it stands in for cameras, which do not share the
   daemon's cores, and a frame it sends late would read as the daemon's lateness);
2. runs the real daemon in-process (CPU provider, `model` forced per camera; tracking on, and with
   `--lines` (the default) a counting line across each camera's belt, so crossings are counted;
   `--snapshots`: a JPEG per crossing) for --settle seconds once every camera has published (the
   start-up: connections, first keyframes; its freshness is reported apart, as `startup`), then for
   T seconds, sampling
   stream lengths, CPU and RSS every second; reads every entry back (latency = published_ms - captured_ms);
3. baseline 1: bare `session.run` on the clips' own frames (letterboxed as the workers do) at the
   batch sizes the daemon used, measured two ways and the higher taken: one session with ORT's
   default threads, and the daemon's layout (`engine.workers` sessions side by side, each with its
   share of the cores); measured before and after the daemon phase and averaged, the ratio
   after / before printed as the host's speed drift (a shared machine's speed changes over
   minutes; above 10 % the ratios are flagged unreliable).
   Then, as a diagnostic, the same layout beside a separate process that only decodes the same
   streams (tools/bench/decoders.py): what is left of the bare model once every frame is decoded
   on the same cores, and the share of that the daemon reached;
4. baseline 2: the naive one-loop pipeline (tools/bench/naive.py) on one session with ORT's
   default threads, latency vs the expected capture time;
5. prints a table and the acceptance checks; writes report.json and bench.png into --out (default:
   bench-<time> in the run-output folder of tools/kit/run_output.py, outside the repository);
6. the per-stage CPU budget of the main daemon phase (`tools/bench/budget.py`): the daemon's own
   `beltsight_stage_cpu_seconds_total{stage}` counters (thread CPU, measured where each stage runs),
   per published frame and as a share of the machine, beside the bare model's session.run CPU per
   image in the daemon's layout, and per thread role what the stages leave untimed. The phase
   alternates the counters on and off every --stage-ab-seconds: the budget comes from the "on"
   segments, the counters' own cost from on/off pairs (median ratios of fps and CPU per frame).
`--ab EXPERIMENT` (`tools/bench/experiments.py`: worker pinning, the readers' scheduling policy or nice
value) switches that experiment on and off every --stage-ab-seconds instead of the counters (which
stay on) and prints its on/off ratios: a change to where the daemon's threads run, measured in one run.
`--flame FILE.svg` records the main daemon phase (up to 60 s) with py-spy (`--threads --nonblocking`, the
daemon's process); `--flame FILE.txt` writes collapsed stacks instead; with --null-model, one file per
camera count (FILE-32.svg).
`--scaling 1,2,4,8,16` is a sweep that also plots published / offered, the ratio to the bare model
and RSS per camera count into scaling.png, and names the knee (the last count served in full).
`--ultralytics PYTHON` (an interpreter with ultralytics and onnxruntime) adds Ultralytics' streaming
predictor on the same streams and model (`tools/bench/ultralytics_run.py`), after the naive loop and,
with `--null-model`, after each count's phases; the daemon's frames/s over its are printed.
`--sweep` runs the daemon phase once per camera count (T each); the table and checks use --cameras
(or the last count of the sweep when --cameras is not in it). Every process started is stopped on exit.

`--null-model` (`tools/bench/null_bench.py`) is another mode: the model replaced by its null model
(`tools/bench/null_model.py`: same I/O and metadata, fixed boxes, standing in for a fast GPU), the
daemon at each `--cameras` count up to and past saturation beside a decode-only run of the same
streams, one table (frames/s, CPU per frame by stage and outside decoding and the model's run, the
busiest thread, freshness p50/p99, least/most served camera, RSS, decode-only fps and CPU);
its lanes shaped as the daemon shapes a CUDA lane (one session, batches up to max_batch), as on the GPU
the null model stands in for, and `engine.processes` auto, as the daemon's default; `--lanes cpu,gpu` adds
phases with the CPU lanes' shape (a session per core, one frame per batch). `--preprocess both` runs
each count with `engine.preprocess` "host" and "graph", `--processes 1,auto` with each `engine.processes`
value (the daemon's CPU, threads and RSS include its decoder processes); `--gil` adds
`tools/bench/gil.py` (where each thread role waits for the interpreter lock, from py-spy).

Modules: `cli` (the flags and their checks), `phase` (the daemon in-process, sampled),
`budget` (stage budget, counters' cost, scaling),
`baselines` (the bare model, beside decoders, the naive loop), `naive` (that loop), `procs` (the
servers, clips, /proc readers), `report` (checks, table, plot); `python -m
tools.bench.decoders URL ...` and `python -m tools.bench.preprocess` are the decoding load and the
pre-processing micro-bench;
`python -m tools.bench.redis_parser` measures the sink's pipelines with redis-py's Python parser
against hiredis';
`python -m tools.bench.lines_apply` measures lines applied live (a PUT to the next frame) and a
reload under the load of 4 cameras.
"""
