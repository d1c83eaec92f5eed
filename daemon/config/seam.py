"""The config room's public seam: what the lab (`tools/`) may use of `daemon.config`.

One `seam` per room (see `daemon.core.seam` and `PUBLIC_SEAMS` in tests/test_architecture.py): the
whole configuration (`Settings`, `load_settings`, `ConfigError`) and the section models a bench or
a check builds by hand (engine, Redis, cameras, tracking, thermal, bridge, reconcile, capture, clips).
"""

from daemon.config.bridge import BridgeConfig
from daemon.config.cameras import CameraConfig
from daemon.config.capture import CaptureConfig, CaptureStrategy
from daemon.config.clips import ClipsConfig
from daemon.config.engine import CudaOptions, EngineConfig, RebuildConfig
from daemon.config.reconcile import ReconcileConfig
from daemon.config.redis import RedisConfig
from daemon.config.settings import ConfigError, Settings, load_settings
from daemon.config.thermal import ThermalConfig
from daemon.config.tracking import TrackingConfig

__all__ = [
    "BridgeConfig",
    "CameraConfig",
    "CaptureConfig",
    "CaptureStrategy",
    "ClipsConfig",
    "ConfigError",
    "CudaOptions",
    "EngineConfig",
    "RebuildConfig",
    "ReconcileConfig",
    "RedisConfig",
    "Settings",
    "ThermalConfig",
    "TrackingConfig",
    "load_settings",
]
