"""The ingest room: cameras (RTSP or recorded files) in, decoded frames out to a `FrameConsumer`.

One thread per camera (`sources.CameraSource`: connect, reconnect with backoff, status events)
runs the decode loop of each connection (`reader.FrameReader`: demux, decode, pace, route, hand
off); `geometry` letterboxes per resolution, `decoding` holds the PyAV helpers (scaling for a
model, error reasons), `hwdecode` opens streams on NVDEC where the lanes run on the device.

May import: `daemon.core`, `daemon.config`. Entry points: `daemon.ingest.sources.CameraSource`,
`daemon.ingest.hwdecode.source_decode` / `nvdec_status`.
"""
