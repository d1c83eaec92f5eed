"""The configuration room: the TOML file plus `BELTSIGHT_*` environment overrides, validated.

`settings.Settings` is the whole configuration, one field per section; each section's model lives
in its own module (`redis`, `engine`, `models`, `logging`, `health`, `cameras`, `thermal`,
`tracking` with the cameras' lines and gates, `bridge`, `sharding` for `[instance]`), all built
on `base.Section` (unknown keys are errors, values frozen).
`load_settings(path)` reads one file per call (re-entrant), with each camera's lines drop-in from
`[tracking] lines_dir` over the file's lines (`lines_dropin`: what the lines API wrote), the models
drop-in `[engine] models_dropin` over `[models]` while it holds (`models_dropin`: what the models API
swapped), and raises `ConfigError` listing every problem with its key path. The only place the
environment is read.

May import: `daemon.core`. Entry points: `Settings`, `load_settings`, `resolve_config_path`,
`ConfigError`, `ThermalConfig` (here), and each section's model from its module.
"""

from daemon.config.settings import ConfigError, Settings, load_settings, resolve_config_path
from daemon.config.thermal import ThermalConfig

__all__ = ["ConfigError", "Settings", "ThermalConfig", "load_settings", "resolve_config_path"]
