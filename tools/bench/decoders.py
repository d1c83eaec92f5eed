"""Decode RTSP streams and nothing else: the decoding load `python -m tools.bench` runs the bare model beside.

    .venv/bin/python -m tools.bench.decoders URL [URL ...]

One thread per stream, PyAV over TCP with one decoder thread, as the daemon's camera sources open
them; every frame is decoded and dropped. Once a second it prints one line on stdout:
`<frames decoded so far, all streams> <this process's CPU seconds so far> <time.monotonic()>`. Runs until killed.
A stream that fails is reported on stderr and the process exits with status 1.
"""

from __future__ import annotations

import os
import sys
import threading
import time

import av

from daemon.ingest.seam import set_decoder_threads
from tools.bench.naive import AV_OPTIONS


def decode(url: str, counts: list[int], index: int) -> None:
    try:
        with av.open(url, options=AV_OPTIONS, timeout=(10.0, 5.0)) as container:
            stream = container.streams.video[0]
            set_decoder_threads(stream, 1)
            for packet in container.demux(stream):
                counts[index] += len(packet.decode())
    except Exception as exc:  # any failure ends the load: the measurement beside it is void
        print(f"bench_decoders: stream {index}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
    os._exit(1)  # a stream that ends or fails leaves the load short


def main() -> None:
    urls = sys.argv[1:]
    counts = [0] * len(urls)
    for i, url in enumerate(urls):
        threading.Thread(target=decode, args=(url, counts, i), daemon=True).start()
    while True:
        time.sleep(1.0)
        print(sum(counts), round(time.process_time(), 3), round(time.monotonic(), 3), flush=True)


if __name__ == "__main__":
    main()
