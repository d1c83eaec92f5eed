"""Prometheus metrics: one registry per daemon instance (tests run several in one process).

Every frame the daemon accepted ends in exactly one of: `published` or `dropped{reason}`;
`beltsight_frames_decoded_total` counts what came in, so the two sides can be reconciled.
The README's table lists every metric (a test keeps it complete)."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from daemon.core.drop_reasons import DropReason
from daemon.core.stagecpu import StageCpu


@dataclass
class Metrics:
    registry: CollectorRegistry = field(default_factory=lambda: CollectorRegistry(auto_describe=True))

    def __post_init__(self) -> None:
        self._frame_metrics(self.registry)
        self._camera_metrics(self.registry)
        self._inference_metrics(self.registry)
        self._sink_metrics(self.registry)
        self._http_metrics(self.registry)
        self._thermal_metrics(self.registry)
        self._tracking_metrics(self.registry)
        self._snapshot_metrics(self.registry)
        self._clip_metrics(self.registry)
        self._capture_metrics(self.registry)
        self._stage_metrics(self.registry)

    def _stage_metrics(self, r: CollectorRegistry) -> None:
        """Where the CPU goes, per stage of a frame's path (`daemon.core.stagecpu`)."""
        self.stage_cpu_seconds = Counter(
            "beltsight_stage_cpu_seconds",
            "Thread CPU time spent in each pipeline stage, measured in the thread that runs it: demux"
            " (reading the stream's packets), decode, handoff (to the batcher's slot), batching, letterbox"
            " (scale and fill the batch; on the device path the host's share: uploads), session_run,"
            " postprocess (decode and NMS), tracking, encode (the entries), redis (the pipeline's round"
            " trip on the event loop), snapshot, capture, clip (muxing on the clip writer's thread)",
            ["stage"],
            registry=r,
        )
        self.stage_cpu = StageCpu(self.stage_cpu_seconds)

    def _frame_metrics(self, r: CollectorRegistry) -> None:
        """Every frame's path: decoded, then dropped (by reason) or inferred and published."""
        self.frames_decoded = Counter(
            "beltsight_frames_decoded_total", "Frames decoded per camera", ["camera"], registry=r
        )
        self.frames_dropped = Counter(
            "beltsight_frames_dropped_total",
            "Frames accepted and then dropped, by camera and reason",
            ["camera", "reason"],
            registry=r,
        )
        self.frames_inferred = Counter(
            "beltsight_frames_inferred_total", "Frames run through a model", ["camera", "model"], registry=r
        )
        self.entries_published = Counter(
            "beltsight_entries_published_total", "Stream entries written to Redis", ["camera"], registry=r
        )
        self.latency_seconds = Histogram(
            "beltsight_latency_seconds",
            "Capture to XADD per entry",
            ["camera"],
            buckets=(0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12),
            registry=r,
        )

    def _snapshot_metrics(self, r: CollectorRegistry) -> None:
        """Crossing snapshots ([snapshots]): written, dropped (never a frame or an event), removed."""
        self.snapshots_written = Counter(
            "beltsight_snapshots_written_total", "Crossing snapshots written to disk", ["camera"], registry=r
        )
        self.snapshots_dropped = Counter(
            "beltsight_snapshots_dropped_total",
            "Crossing snapshots not written, by reason (queue_full, disk_full, write_error, encode_error, no_frame)",
            ["reason"],
            registry=r,
        )
        self.snapshots_removed = Counter(
            "beltsight_snapshots_removed_total",
            "Snapshots removed by retention, by reason (age, size)",
            ["reason"],
            registry=r,
        )
        self.snapshots_bytes = Gauge(
            "beltsight_snapshots_bytes", "Bytes the snapshot directory's JPEGs take", registry=r
        )

    def _clip_metrics(self, r: CollectorRegistry) -> None:
        """Crossing clips ([clips]): written, dropped (never a frame or an event), removed, the packet rings."""
        self.clips_written = Counter(
            "beltsight_clips_written_total", "Crossing clips written to disk (complete)", ["camera"], registry=r
        )
        self.clips_dropped = Counter(
            "beltsight_clips_dropped_total",
            "Crossing clips not written (their crossings published without `clip`, or naming a file that never"
            " appears), by reason (queue_full, no_packets, late, disk_full, write_error)",
            ["reason"],
            registry=r,
        )
        self.clips_removed = Counter(
            "beltsight_clips_removed_total", "Clips removed by retention, by reason (age, size)", ["reason"], registry=r
        )
        self.clips_bytes = Gauge("beltsight_clips_bytes", "Bytes the clip directory's MP4s take", registry=r)
        self.clip_ring_bytes = Gauge(
            "beltsight_clip_ring_bytes",
            "Bytes each camera's packet ring holds (encoded packets kept for clips, with their bookkeeping)",
            ["camera"],
            registry=r,
        )

    def _capture_metrics(self, r: CollectorRegistry) -> None:
        """Frame capture ([capture]): written per strategy, dropped (never a frame), limited, removed."""
        self.capture_written = Counter(
            "beltsight_capture_written_total",
            "Captured frames written to the dataset (image and labels), by camera and strategy",
            ["camera", "strategy"],
            registry=r,
        )
        self.capture_dropped = Counter(
            "beltsight_capture_dropped_total",
            "Captures not written, by reason (queue_full, disk_full, write_error, encode_error, no_frame)",
            ["reason"],
            registry=r,
        )
        self.capture_limited = Counter(
            "beltsight_capture_limited_total",
            "Frames a strategy picked but did not capture because its per-camera limit was reached"
            " (limit: per_minute, per_hour)",
            ["camera", "strategy", "limit"],
            registry=r,
        )
        self.capture_removed = Counter(
            "beltsight_capture_removed_total", "Captured frames removed to stay under [capture] max_mb", registry=r
        )
        self.capture_bytes = Gauge(
            "beltsight_capture_bytes", "Bytes the capture directory's images and labels take", registry=r
        )

    def _tracking_metrics(self, r: CollectorRegistry) -> None:
        """What the tracking stage sees: parts, not boxes."""
        self.crossings = Counter(
            "beltsight_crossings_total",
            "Tracked parts that crossed a counting line, by camera, line, direction and label",
            ["camera", "line", "direction", "label"],
            registry=r,
        )
        self.active_tracks = Gauge(
            "beltsight_active_tracks", "Confirmed tracks alive (seen within lost_s)", ["camera"], registry=r
        )
        self.object_events = Counter(
            "beltsight_object_events_total",
            "Events for the objects stream, by camera and event",
            ["camera", "event"],
            registry=r,
        )

    def _camera_metrics(self, r: CollectorRegistry) -> None:
        """Each camera's connection and stream health."""
        self.corrupt_packets = Counter(
            "beltsight_corrupt_packets_total", "Packets or frames that failed to decode", ["camera"], registry=r
        )
        self.camera_up = Gauge("beltsight_camera_up", "1 while the camera delivers frames", ["camera"], registry=r)
        self.camera_reconnects = Counter(
            "beltsight_camera_reconnects_total", "Connection attempts after a failure", ["camera"], registry=r
        )

    def _inference_metrics(self, r: CollectorRegistry) -> None:
        """Batches, session.run time and CPU, and the engines behind them."""
        self.batch_size = Histogram(
            "beltsight_batch_size",
            "Frames per inference batch",
            ["model"],
            buckets=(1, 2, 3, 4, 6, 8, 12, 16, 32, 64),
            registry=r,
        )
        self.inference_seconds = Histogram(
            "beltsight_inference_seconds",
            "session.run wall time per batch",
            ["model"],
            buckets=(0.002, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28),
            registry=r,
        )
        self.inference_cpu_seconds = Counter(
            "beltsight_inference_cpu_seconds",
            "CPU time of the thread that ran session.run (all of it with one intra-op thread, the"
            " host's share on CUDA); against beltsight_inference_seconds_sum it shows inference"
            " waiting for a core",
            ["model"],
            registry=r,
        )
        self.breaker_open = Gauge(
            "beltsight_breaker_open", "1 while the primary engine's breaker is open", ["model"], registry=r
        )
        self.session_builds = Counter(
            "beltsight_session_builds_total", "Inference sessions built", ["model", "reason"], registry=r
        )

    def _sink_metrics(self, r: CollectorRegistry) -> None:
        """The way to Redis."""
        self.sink_buffered = Gauge(
            "beltsight_sink_buffered_entries", "Entries accepted and not yet in Redis", registry=r
        )
        self.sink_spooled = Gauge(
            "beltsight_sink_spooled_entries",
            "Entries waiting in the disk spool (part of beltsight_sink_buffered_entries)",
            registry=r,
        )
        self.redis_up = Gauge("beltsight_redis_up", "1 while Redis accepts writes", registry=r)
        self.sink_held = Gauge(
            "beltsight_sink_held_entries",
            "Entries of a camera held apart because Redis refuses its stream key, or its Cluster slot or master "
            "failed alone (part of buffered)",
            ["camera"],
            registry=r,
        )
        self.stream_refusals = Counter(
            "beltsight_sink_stream_refusals",
            "Batches in which Redis refused one camera's stream key (WRONGTYPE, NOPERM on a key) or its Cluster "
            "slot or master failed alone (CLUSTERDOWN, TRYAGAIN, MOVED, ASK, NODE_DOWN), by code",
            ["camera", "code"],
            registry=r,
        )
        self.replica_waits = Counter(
            "beltsight_redis_replica_waits",
            "WAITs after a batch (min_replicas > 0), by outcome: confirmed, short (fewer replicas in time)",
            ["outcome"],
            registry=r,
        )
        self.instance_cameras = Gauge(
            "beltsight_instance_cameras",
            "Cameras this instance runs, of the configured ones ([instance] shard of shards)",
            ["shard", "shards"],
            registry=r,
        )

    def _http_metrics(self, r: CollectorRegistry) -> None:
        """The health endpoint and live view: what clients hold and what the daemon turned away."""
        self.http_connections_open = Gauge(
            "beltsight_http_connections_open", "Connections open on the health endpoint", registry=r
        )
        self.http_connections_closed = Counter(
            "beltsight_http_connections_closed_total",
            "Health-endpoint connections the daemon closed itself: evicted (idle, for a new one),"
            " refused (over max_connections, all busy), deadline (request_timeout_s passed),"
            " bad_request (unparsable or oversized request, answered 400)",
            ["reason"],
            registry=r,
        )
        self.http_requests_refused = Counter(
            "beltsight_http_requests_refused_total",
            "Health-endpoint requests a browser's page could have forged, refused: host (a Host that is not"
            " a loopback name on a loopback endpoint: DNS rebinding, 403), origin (a write from another site's"
            " page, 403), content_type (a write whose body is not application/json, 415)",
            ["reason"],
            registry=r,
        )
        self.http_auth_failures = Counter(
            "beltsight_http_auth_failures_total",
            "Health-endpoint requests refused by basic authentication: missing (no or unparsable"
            " credentials), bad_credentials (unknown user or wrong password), busy (too many"
            " verifications queued, answered 503)",
            ["reason"],
            registry=r,
        )
        self.snapshot_encodes = Counter(
            "beltsight_snapshot_encodes_total", "Live-view JPEGs drawn and encoded", ["camera"], registry=r
        )

    def _thermal_metrics(self, r: CollectorRegistry) -> None:
        """The thermal governor: what the sensors read and the share of full speed it admits."""
        self.temperature = Gauge(
            "beltsight_temperature_celsius", "Temperature per sensor (absent while offline)", ["sensor"], registry=r
        )
        self.throttle_share = Gauge(
            "beltsight_throttle_share", "Share of full inference speed admitted (1 full, 0 paused)", registry=r
        )
        self.throttle_share.set(1.0)
        self.throttle_level = Gauge(
            "beltsight_throttle_level", "Thermal throttle level: 0 normal, 1 regulating, 2 paused", registry=r
        )
        self.throttle_seconds = Counter(
            "beltsight_throttle_seconds", "Seconds spent at each throttle level", ["level"], registry=r
        )

    def retire_camera(self, camera_id: str) -> int:
        """Remove every series labelled `camera=camera_id` (a camera removed live: its series end
        instead of standing still forever); the number of series removed."""
        removed = 0
        for metric in list(vars(self).values()):
            if not isinstance(metric, Counter | Gauge | Histogram):
                continue
            names: tuple[str, ...] = tuple(metric._labelnames)  # no public way to list them
            if "camera" not in names:
                continue
            series = {
                tuple(sample.labels.get(n, "") for n in names)
                for family in metric.collect()
                for sample in family.samples
                if sample.labels.get("camera") == camera_id
            }
            for values in series:
                metric.remove(*values)
            removed += len(series)
        return removed

    def dropped(self, camera_id: str, reason: DropReason, n: int = 1) -> None:
        """Count `n` frames dropped for `reason` (their meanings: `daemon.core.drop_reasons`)."""
        self.frames_dropped.labels(camera=camera_id, reason=reason).inc(n)
