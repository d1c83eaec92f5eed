"""The builder: every stage of the daemon built from settings and wired, returned as one value.

`build(settings)` (`wiring`) proves the models (`daemon.inference.build.prove_models`, in a thread:
model files checked, the configured provider proved on a real session) and wires the rest: camera
sources -> `FrameHub` -> each lane's `Batcher` -> lane workers (`daemon.inference.lanes`, built by
`daemon.inference.build.LaneWorkers`) -> `publish`, the one seam where results leave the lanes
(`results`) -> the `TrackingStage` (track ids, object events) -> the sink (and the live view, the
snapshot writer and the frame capture); the health endpoint and the controls behind its APIs
(`endpoint`): `LinesControl` changes a camera's lines between frames, `ModelsControl` swaps a model
between batches, the `Reloader` applies a re-read config.

The builder only builds: no thread, task, socket or connection is started and no file is opened
or written (the sink's spools are recovered by `RedisSink.open`, the models drop-in pruned by
`ModelsControl.prune`). `daemon.app.Daemon` starts, drains and stops what this returns.

May import every stage's room, `daemon.ops`, `daemon.config` and `daemon.core`; in the daemon,
imported by `daemon.app` only. Entry points: `build`, `Pipeline`, `Phase`.
"""

from daemon.pipeline.wiring import Phase, Pipeline, build

__all__ = ["Phase", "Pipeline", "build"]
