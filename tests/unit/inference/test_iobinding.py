"""IO binding by address (daemon.inference.iobinding), run with the real ONNX Runtime on CPU sessions.

On a GPU the same `run_bound` binds CuPy device pointers with device type "cuda"; here
`device_type="cpu"` binds NumPy buffers, so the binding code itself (input by address,
preallocated and ORT-allocated outputs, multi-output layouts joined as the daemon joins them,
run options) is exercised against `session.run`. tests/gpu/ and tools/checks/gpu_check.py repeat it on
CUDA.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from daemon.inference.iobinding import run_bound, run_options
from daemon.inference.model_file import load_model_info
from daemon.inference.postprocess import join_outputs
from tests.support.onnx_models import DEMO_MODELS, wrap_demo, write_yolo_model

SIZE = 416


def session(path: Path) -> ort.InferenceSession:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def batch(n: int) -> np.ndarray:
    return np.random.default_rng(n).uniform(0, 1, (n, 3, SIZE, SIZE)).astype(np.float32)


def test_bound_input_and_preallocated_output_equal_session_run(tmp_path: Path) -> None:
    path = write_yolo_model(tmp_path / "m.onnx", SIZE, image_gain=3.0)
    info = load_model_info(path, SIZE)
    sess = session(path)
    images = batch(2)
    want = sess.run([info.output_name], {info.input_name: images})[0]
    out = np.empty_like(want)
    got = run_bound(
        sess,
        images,
        input_name=info.input_name,
        output_names=[info.output_name],
        device_id=0,
        cupy=np,
        preallocated={info.output_name: out},
        device_type="cpu",
    )
    assert got[0] is out  # written in place, at the bound address
    np.testing.assert_array_equal(out, want)
    allocated = run_bound(
        sess,
        images,
        input_name=info.input_name,
        output_names=[info.output_name],
        device_id=0,
        cupy=np,
        device_type="cpu",
        synchronize=False,
    )
    np.testing.assert_array_equal(allocated[0], want)


@pytest.mark.skipif(not (DEMO_MODELS / f"conveyor-{SIZE}.onnx").is_file(), reason="demo model not built")
@pytest.mark.parametrize("kind", ["end2end-four", "yolov5", "segment"])
def test_multi_output_layouts_join_as_the_host_path(tmp_path: Path, kind: str) -> None:
    path = wrap_demo(tmp_path / f"{kind}.onnx", kind, SIZE)
    info = load_model_info(path, SIZE)
    sess = session(path)
    images = batch(1)
    host = join_outputs(np, sess.run(list(info.output_names), {info.input_name: images}), info.decoding)
    outs = run_bound(
        sess,
        images,
        input_name=info.input_name,
        output_names=list(info.output_names),
        device_id=0,
        cupy=np,
        device_type="cpu",
    )
    assert len(outs) == len(info.output_names)
    np.testing.assert_array_equal(join_outputs(np, outs, info.decoding), host)


def test_run_options_skip_the_end_of_run_synchronisation_only_when_asked() -> None:
    assert run_options(synchronize=True) is None
    opts = run_options(synchronize=False)
    assert opts is not None
    assert opts.get_run_config_entry("disable_synchronize_execution_providers") == "1"
