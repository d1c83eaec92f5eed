"""The ingest room's public seam: what the lab (`tools/`) may use of `daemon.ingest`.

One `seam` per room (see `daemon.core.seam` and `PUBLIC_SEAMS` in tests/test_architecture.py): a
camera thread (`CameraSource`), the PyAV helpers the benches decode with (`rgb_planes`, `scale`,
`set_decoder_threads`), the clip recorder's `PacketTap`, `hwdecode` (as a module: the GPU check
opens NVDEC streams and reads its status), and the decoder processes' `SlotRing` (the hand-off bench).
"""

from daemon.ingest import hwdecode
from daemon.ingest.decoding import rgb_planes, scale, set_decoder_threads
from daemon.ingest.packet_tap import PacketTap
from daemon.ingest.shm_ring import SlotRing
from daemon.ingest.sources import CameraSource

__all__ = ["CameraSource", "PacketTap", "SlotRing", "hwdecode", "rgb_planes", "scale", "set_decoder_threads"]
