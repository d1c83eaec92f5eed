"""The batching room: the hand-off from camera threads to inference, and when a batch runs.

`hub.FrameHub` keeps one slot per camera (latest frame wins for live cameras, blocking for
replays); `batcher.Batcher` waits on the event loop until a batch is full or its oldest frame's
deadline, honours the thermal share, and `InOrder` releases results in batch order;
`router.ModelRouter` picks each camera's model size.

May import: `daemon.core`, `daemon.config`. Entry points: `daemon.batching.hub.FrameHub`,
`daemon.batching.batcher.Batcher` / `BatchPolicy` / `InOrder`, `daemon.batching.router.ModelRouter`.
"""
