"""The results' way through the lanes: batches from the hub, each finished batch observed, each
result tracked, its evidence named, shown and published.

`lanes` builds every model size's lane (`daemon.inference.lanes.Lanes`) with its batcher
(`daemon.batching`), the order its results leave in, and the two seams where they leave:
`observe` (each batch with its frames: the live view, the snapshot writer and the capture keep
references only) and `publish` (each result, in order: `TrackingStage` -> capture -> snapshots ->
clips -> live view -> sink); a lane starts when the first frame of its size arrives.
"""

from __future__ import annotations

import asyncio

from daemon.batching.batcher import Batcher, BatchPolicy, InOrder
from daemon.batching.hub import FrameHub
from daemon.config.settings import Settings
from daemon.core.frames import Frame, FrameResult
from daemon.core.metrics import Metrics
from daemon.inference.build import LaneWorkers
from daemon.inference.lanes import Batching, Lanes, Observe, Publish
from daemon.inference.providers import lane_workers, worker_batch
from daemon.ops.liveview import LiveView
from daemon.publish.capture import FrameCapture
from daemon.publish.evidence import Evidence
from daemon.publish.sink import RedisSink
from daemon.publish.snapshots import SnapshotWriter
from daemon.tracking.stage import TrackingStage


def lanes(
    settings: Settings,
    metrics: Metrics,
    hub: FrameHub,
    workers: LaneWorkers,
    *,
    tracking: TrackingStage,
    liveview: LiveView,
    sink: RedisSink,
    evidence: Evidence,
) -> Lanes:
    """Every model size's lane: batches from the hub, results tracked, with their evidence, to the
    sink; a lane starts when the first frame of its size arrives (`_on_demand`)."""
    built = Lanes(
        settings.engine,
        metrics,
        build=workers,
        batching=_batching(settings, hub, metrics),
        publish=_publish(tracking, liveview, sink, evidence),
        observe=_observe(liveview, evidence.snapshots, evidence.capture),
    )
    _on_demand(hub, built, asyncio.get_running_loop())
    return built


def _on_demand(hub: FrameHub, lanes: Lanes, loop: asyncio.AbstractEventLoop) -> None:
    """A lane starts when the first frame of its size arrives (from a camera's thread)."""

    def lane_needed(size: int) -> None:
        loop.call_soon_threadsafe(lanes.ensure, size)

    hub.on_new_size(lane_needed)


def _observe(liveview: LiveView, *writers: SnapshotWriter | FrameCapture | None) -> Observe:
    """Each finished batch: the live view, the snapshot writer and the capture keep references only."""
    active = [w for w in writers if w is not None]
    if not active:
        return liveview.offer

    def observe(frames: list[Frame], results: list[FrameResult]) -> None:
        liveview.offer(frames, results)
        for writer in active:
            writer.observe(frames, results)

    return observe


def _publish(tracking: TrackingStage, liveview: LiveView, sink: RedisSink, evidence: Evidence) -> Publish:
    snapshots, capture, clips = evidence.snapshots, evidence.capture, evidence.clips

    def publish(results: list[FrameResult]) -> None:
        """Where results leave the lanes, in order: tracked, captured, snapshots and clips named, shown, published."""
        for result in results:
            tracked = tracking.process(result)
            if capture is not None:
                capture.offer(result, tracked)  # before tracking (its weak detections) and after
            if snapshots is not None:
                tracked = snapshots.attach(tracked)
            if clips is not None:
                tracked = clips.attach(tracked)
            liveview.tracked(tracked)
            sink.accept(tracked)

    return publish


def _batching(settings: Settings, hub: FrameHub, metrics: Metrics) -> Batching:
    def batching(size: int, max_batch: int) -> tuple[Batcher, InOrder[FrameResult]]:
        """A lane's batcher, fed by the hub, and the order its results are published in (on the loop)."""
        ecfg = settings.engine
        policy = BatchPolicy(
            max_batch,
            ecfg.max_wait_ms / 1000,
            ecfg.max_age_ms / 1000,
            workers=lane_workers(ecfg),
            per_worker=worker_batch(ecfg),
        )
        return Batcher(size, hub, policy, asyncio.get_running_loop(), metrics=metrics), InOrder()

    return batching


__all__ = ["lanes"]
