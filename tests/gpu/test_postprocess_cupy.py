"""decode_batch with CuPy gives the same rows as with NumPy (GPU hosts only; skipped elsewhere)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from daemon.core.xp import GpuUnavailableError, get_xp, is_device_array, to_host
from daemon.inference.layouts.yolov8 import bare_layout
from daemon.inference.postprocess import decode_batch, greedy_nms
from tests.support.postprocess_refs import C, make_output, random_boxes, reference_nms

cupy = pytest.importorskip("cupy")
try:
    xp_gpu = get_xp("cuda")
except GpuUnavailableError as exc:  # CuPy installed but no driver or device
    pytest.skip(f"no usable CUDA device: {exc}", allow_module_level=True)

pytestmark = pytest.mark.gpu


def both(output: np.ndarray, **kwargs: Any) -> tuple[list[np.ndarray], list[np.ndarray]]:
    args: dict[str, Any] = {"conf_threshold": 0.25, "iou_threshold": 0.5, "max_det": 300} | kwargs
    if "layout" not in args:
        args["layout"] = bare_layout(output)
    on_cpu = decode_batch(np, output, **args)
    gpu_args = {k: (cupy.asarray(v) if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    on_gpu = decode_batch(xp_gpu, cupy.asarray(output), **gpu_args)
    assert all(isinstance(r, np.ndarray) for r in on_gpu)  # rows always come back to the host
    return on_cpu, on_gpu


def assert_same(a: list[np.ndarray], b: list[np.ndarray]) -> None:
    assert [r.shape for r in a] == [r.shape for r in b]
    for ra, rb in zip(a, b, strict=True):
        np.testing.assert_allclose(ra, rb, rtol=1e-6, atol=1e-4)


def test_hand_made_outputs_match() -> None:
    out = make_output(
        2,
        [
            [(100, 100, 200, 200, 1, 0.9), (105, 105, 205, 205, 1, 0.8), (105, 105, 205, 205, 3, 0.7)],
            [(10, 20, 50, 80, 2, 0.6), (200, 200, 260, 230, 0, 0.3)],
        ],
    )
    assert_same(*both(out))
    assert_same(*both(out, conf_threshold=np.array([0.5, 0.2], np.float32)))
    assert_same(*both(out, class_mask=np.array([True, False, True, True])))
    assert_same(*both(out, max_det=1))
    assert_same(*both(np.zeros((3, 4 + C, 64), np.float32)))


def test_nan_is_rejected_on_the_device_too() -> None:
    out = make_output(1, [[(0, 0, 10, 10, 0, 0.9), (50, 50, 60, 60, 1, 0.8)]])
    out[0, 2, 1] = np.nan
    cpu_rows, gpu_rows = both(out)
    assert_same(cpu_rows, gpu_rows)
    assert gpu_rows[0][:, 5].tolist() == [0]


@pytest.mark.parametrize("seed", range(3))
def test_random_outputs_match(seed: int) -> None:
    rng = np.random.default_rng(seed)
    out = np.zeros((4, 4 + C, 8400), np.float32)
    out[:, 0:2] = rng.uniform(0, 640, (4, 2, 8400))
    out[:, 2:4] = rng.uniform(4, 120, (4, 2, 8400))
    out[:, 4:] = rng.uniform(0, 1, (4, C, 8400)) ** 8  # mostly low scores, a few hundred candidates
    assert_same(*both(out, conf_threshold=0.3, iou_threshold=0.45))


@pytest.mark.parametrize("seed", range(3))
def test_greedy_nms_matches_reference_on_the_device(seed: int) -> None:
    boxes, scores = random_boxes(np.random.default_rng(seed), 300)
    order = np.argsort(-scores)
    kept = greedy_nms(xp_gpu, cupy.asarray(boxes[order]), cupy.zeros(300, cupy.float32), 0.45)
    assert is_device_array(kept)
    assert sorted(order[to_host(kept)].tolist()) == sorted(reference_nms(boxes, scores, 0.45))
