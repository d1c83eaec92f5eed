"""The ingest room: cameras (RTSP, recorded files or GigE Vision) in, frames out to a `FrameConsumer`.

One thread per camera (`sources.CameraSource`: connect, reconnect with backoff, status events)
reads each connection through the link its URL's scheme picks (`kinds.make_link`): PyAV for RTSP
and files (`av_link`, running `reader.FrameReader`: demux, decode, pace, route, hand off), Aravis
for `gige://` (`gige`: GenICam settings, block ids, camera timestamps, no decode); `geometry`
letterboxes per resolution, `decoding` holds the PyAV helpers (scaling for a model, error
reasons), `hwdecode` opens streams on NVDEC where the lanes run on the device. With
`[engine] processes` above 1 the RTSP and file links run in decoder processes instead
(`decoders`: the pool and the daemon's side of each link; `decoder_proc`: the process; `shm_ring`:
the shared-memory slots the frames' planes come through).

May import: `daemon.core`, `daemon.config`. Entry points: `daemon.ingest.sources.CameraSource`,
`daemon.ingest.hwdecode.source_decode` / `nvdec_status`.
"""
