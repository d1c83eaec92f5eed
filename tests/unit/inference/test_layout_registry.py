"""The layout families' extension point: a family registered in the one table (`FAMILIES`) is
recognised, gives its input convention, checks a warm-up output and decodes through the same
public functions as the built-in families, with no other module edited."""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args

import numpy as np
import pytest
from pydantic import ValidationError

from daemon.config.models import ModelConfig
from daemon.core.model_spec import LayoutName
from daemon.core.xp import ArrayModule
from daemon.inference.layouts import FAMILIES, ModelLayout, family, names, warm_up_mismatch
from daemon.inference.layouts.base import Candidates, Claim, Decode, Found, LayoutFamily, OutputInfo
from daemon.inference.layouts.dense import candidates, split_classes
from daemon.inference.model_file import load_model_info
from daemon.inference.postprocess import decode_batch, join_outputs
from tests.support.onnx_models import NAMES, anchors_for, default_metadata, write_yolo_model

SIZE = 64
C = len(NAMES)


class Corners(LayoutFamily):
    """A test-only family: `[N, A, C + 4]`, the class scores first, then the box as x1, y1, x2, y2;
    recognised only when named; BGR pixels unscaled, as some in-house exports feed them."""

    name = "corners"
    color = "bgr"
    scale = 1.0
    convention_origin = "corners defaults"

    def claim(self, main: OutputInfo, found: Found) -> Claim | None:
        return Claim.DECLARED if found.override == self.name and len(main.shape) == 3 else None

    def recognise(self, main: OutputInfo, found: Found, probe: Any | None) -> ModelLayout:
        classes, extra, _ = split_classes(main.shape[2] - 4, found, f"output '{main.name}'")
        return ModelLayout(
            self.name, "scores-first", (main.name,), classes, main.shape[1], found.size, (), extra, "named"
        )

    def expected(self, anchors: int) -> tuple[str, ...]:
        return (f"[N, {anchors}, C + 4] (corners)",)

    def mismatch(self, layout: ModelLayout, shape: tuple[int, ...], batch: int) -> str:
        expected = (batch, layout.rows, layout.num_classes + 4)
        return "" if shape == expected else f"expected {list(expected)}"

    def decode(self, xp: ArrayModule, output: Any, layout: ModelLayout, how: Decode) -> Candidates:
        out, c = output[: how.images], layout.num_classes

        def cxcywh(img: Any, anchor: Any) -> Any:
            x1, y1, x2, y2 = (out[img, anchor, c + k] for k in range(4))
            return xp.stack(((x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1), axis=1)

        return candidates(xp, out[:, :, :c], 2, cxcywh, how)


@pytest.fixture
def corners(monkeypatch: pytest.MonkeyPatch) -> Corners:
    family_ = Corners()
    monkeypatch.setitem(FAMILIES, family_.name, family_)  # the one place a family is registered
    return family_


def _template() -> np.ndarray:
    """[1, C + 4, A] (the stub writer transposes it to [1, A, C + 4]): two overlapping parts and one apart."""
    tmpl = np.zeros((1, C + 4, anchors_for(SIZE)), dtype=np.float32)
    tmpl[0, C:, :] = np.array([[0], [0], [2], [2]], dtype=np.float32)
    for anchor, cls, score, box in (
        (3, 2, 0.9, (10, 12, 30, 40)),
        (4, 2, 0.8, (11, 12, 30, 41)),
        (7, 0, 0.6, (40, 40, 60, 50)),
    ):
        tmpl[0, cls, anchor] = score
        tmpl[0, C:, anchor] = box
    return tmpl


def test_a_registered_family_is_recognised_and_decoded_through_the_public_functions(
    corners: Corners, tmp_path: Path
) -> None:
    assert "corners" in names() and family("corners") is corners
    meta = default_metadata(SIZE) | {"layout": "corners"}
    path = write_yolo_model(tmp_path / "corners.onnx", SIZE, template=_template(), metadata=meta, transposed=True)

    info = load_model_info(path, SIZE)

    assert (info.layout, info.decoding.form, info.num_classes, info.names) == ("corners", "scores-first", C, NAMES)
    conv = info.convention
    assert (conv.color, conv.scale, conv.padding, conv.boxes) == ("bgr", 1.0, "symmetric", "content")
    assert "corners defaults" in conv.origin and "NMS class-aware" in info.lines()[0]
    assert not info.class_agnostic_nms and not info.iou_plus_one
    output = np.ascontiguousarray(_template().transpose(0, 2, 1))
    assert join_outputs(np, [output], info.decoding) is output
    assert warm_up_mismatch(info.decoding, output, 1) == ""
    assert warm_up_mismatch(info.decoding, output, 2) == f"expected [2, {anchors_for(SIZE)}, {C + 4}]"
    (rows,) = decode_batch(np, output, layout=info.decoding, conf_threshold=0.5, iou_threshold=0.5, max_det=10)
    np.testing.assert_allclose(rows, [[10, 12, 30, 40, 0.9, 2], [40, 40, 60, 50, 0.6, 0]], rtol=1e-6)


def test_without_the_registry_line_the_family_is_unknown(tmp_path: Path) -> None:
    meta = default_metadata(SIZE) | {"layout": "corners"}
    path = write_yolo_model(tmp_path / "corners.onnx", SIZE, template=_template(), metadata=meta, transposed=True)
    with pytest.raises(
        Exception, match=r"metadata 'layout' is 'corners'; supported: \['yolov8', 'yolov5', 'yolox', 'end2end'\]"
    ):
        load_model_info(path, SIZE)


def test_the_layout_names_are_defined_once_and_the_registry_serves_each() -> None:
    """`daemon.core.model_spec.LayoutName` names the families once; the config accepts exactly those
    (plus `auto`) and the registry has one family for each, in that order."""
    assert names() == get_args(LayoutName)
    with pytest.raises(ValidationError, match="layout"):
        ModelConfig.model_validate({"path": "m.onnx", "layout": "yolov9"})
    for name in ("auto", *names()):
        assert ModelConfig.model_validate({"path": "m.onnx", "layout": name}).layout == name


def test_the_output_shape_the_device_path_preallocates_comes_from_the_family() -> None:
    """A pose export's keypoint channels count (the IO binding used to assume `4 + C`); a transposed
    export is anchors-first; families whose shape only the run decides preallocate nothing."""
    pose = ModelLayout("yolov8", "channels-first", ("output0",), 1, 8400, 640, (8, 16, 32), extra=51)
    assert family("yolov8").output_shape(pose, 3) == (3, 4 + 1 + 51, 8400)
    flipped = ModelLayout("yolov8", "anchors-first", ("output0",), 2, 8400, 640, (8, 16, 32))
    assert family("yolov8").output_shape(flipped, 1) == (1, 8400, 6)
    rows = ModelLayout("end2end", "rows", ("output0",), 2, 0, 640, ())
    assert family("end2end").output_shape(rows, 1) is None
