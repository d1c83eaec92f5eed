"""BeltSight: RTSP cameras in, YOLO detections out on Redis Streams."""

__version__ = "0.1.0"
