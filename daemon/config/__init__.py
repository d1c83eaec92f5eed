"""The configuration room: pydantic-settings models, one module per section, `Section` in `base`.

The only place the environment is read. May import: `daemon.core`. Entry points: `Settings`,
`load_settings`, `resolve_config_path`, `ConfigError`, and each section's model (`ThermalConfig`, ...).
"""

from daemon.config.settings import ConfigError, Settings, load_settings, resolve_config_path
from daemon.config.thermal import ThermalConfig

__all__ = ["ConfigError", "Settings", "ThermalConfig", "load_settings", "resolve_config_path"]
