"""The configured models against the configuration: every model file checked, and every camera's
class filter naming labels the models know; the per-camera post-processing rules built from it.
"""

from __future__ import annotations

from daemon.config.settings import ConfigError, Settings
from daemon.inference.model_file import ModelInfo, load_model_info, log_model
from daemon.inference.stage import CameraRules


def validate_models(settings: Settings) -> dict[int, ModelInfo]:
    """Read and check every configured model file (raises ModelError naming file and problem),
    and that every camera's class filter names labels the models know (else ConfigError)."""
    infos = {
        size: load_model_info(model.path, expected_size=size, overrides=model.overrides())
        for size, model in sorted(settings.models.items())
    }
    for info in infos.values():
        log_model(info)
    errors = []
    for i, cam in enumerate(settings.cameras):
        for size, info in infos.items():
            unknown = sorted(set(cam.classes or ()) - set(info.names))
            if unknown:
                errors.append(f"cameras.{i}.classes: {unknown} not in model {size}'s labels {list(info.names)}")
    if errors:
        raise ConfigError("model labels", errors)
    return infos


def camera_rules(settings: Settings, info: ModelInfo) -> dict[str, CameraRules]:
    """Each of this instance's cameras' confidence threshold and class filter (as the model's
    class ids), for the stages of `info`'s size (labels checked by `validate_models`); a tracked
    camera's `track_floor` is `[tracking] low_score`, so the tracker sees what its second stage matches."""
    label_ids = {label: i for i, label in enumerate(info.names)}
    rules: dict[str, CameraRules] = {}
    for cam in settings.instance_cameras():
        classes = frozenset(label_ids[c] for c in cam.classes) if cam.classes is not None else None
        conf = cam.conf_threshold if cam.conf_threshold is not None else settings.engine.conf_threshold
        floor = settings.tracking.low_score if cam.tracked(settings.tracking) else None
        rules[cam.id] = CameraRules(conf, classes, floor)
    return rules
