"""ONNX Runtime IO binding on CUDA device pointers, for `Engine.run_device`.

ORT does not take CuPy arrays in `session.run`; it takes device pointers through an
`IOBinding`: the input is bound at the CuPy batch's address, the main output of a
channels-first float32 layout into a preallocated CuPy array (a fixed address), every other
output into memory ORT allocates on the device, wrapped as CuPy without a copy (DLPack where
this ORT exports it, else the OrtValue's pointer with the OrtValue kept alive as the owner).

Ordering: the session's CUDA provider was given the engine's CuPy stream as
`user_compute_stream`, so ORT's kernels run on the stream that wrote the batch and that the
NMS runs on next. `run_options(synchronize=False)` lets ORT return without waiting for its
stream (`disable_synchronize_execution_providers`): what follows on that stream sees the
outputs in order; a reader on another stream or on the host must synchronise the stream first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnxruntime as ort

from daemon.core.xp import ArrayModule, is_device_array

# ONNX TensorProto element types -> NumPy
_NUMPY_TYPES: dict[int, Any] = {
    1: np.float32,
    2: np.uint8,
    3: np.int8,
    6: np.int32,
    7: np.int64,
    9: np.bool_,
    10: np.float16,
    11: np.float64,
}


def run_options(*, synchronize: bool) -> ort.RunOptions | None:
    """RunOptions that skip ORT's end-of-run stream synchronisation (None: ORT's default)."""
    if synchronize:
        return None
    options = ort.RunOptions()
    options.add_run_config_entry("disable_synchronize_execution_providers", "1")
    return options


def device_array(cupy: ArrayModule, value: Any) -> Any:
    """A CuPy view of an OrtValue in device memory (no copy; it keeps the OrtValue alive);
    with NumPy as `cupy`, a NumPy view of a CPU OrtValue."""
    if cupy is np:
        return np.from_dlpack(value) if hasattr(value, "__dlpack__") else value.numpy()
    if hasattr(value, "__dlpack__"):
        try:
            return cupy.from_dlpack(value)
        except (TypeError, BufferError, RuntimeError, ValueError):
            pass  # an ORT build without DLPack export: wrap the pointer below
    element = int(value.element_type())
    if element not in _NUMPY_TYPES:
        raise ValueError(f"output of ONNX element type {element} cannot be wrapped")
    dtype = np.dtype(_NUMPY_TYPES[element])
    shape = tuple(int(n) for n in value.shape())
    nbytes = int(np.prod(shape)) * dtype.itemsize
    memory = cupy.cuda.UnownedMemory(int(value.data_ptr()), nbytes, value)
    return cupy.ndarray(shape, dtype, cupy.cuda.MemoryPointer(memory, 0))


def address(array: Any) -> int:
    """The data pointer of a CuPy array (`.data.ptr`) or a NumPy one (`.ctypes.data`)."""
    return int(array.data.ptr) if is_device_array(array) else int(array.ctypes.data)


def run_bound(
    session: ort.InferenceSession,
    images: Any,
    *,
    input_name: str,
    output_names: Sequence[str],
    device_id: int,
    cupy: ArrayModule,
    preallocated: Mapping[str, Any] | None = None,
    synchronize: bool = True,
    device_type: str = "cuda",
) -> list[Any]:
    """Run `session` on the batch `images` (C-contiguous) bound by address; returns the outputs
    as arrays of `cupy`'s module, in order. `device_type` "cpu" (with NumPy arrays) runs the
    same binding on a CPU session: how this code is tested where there is no GPU."""
    given = preallocated or {}
    binding = session.io_binding()
    binding.bind_input(input_name, device_type, device_id, images.dtype.type, list(images.shape), address(images))
    for name in output_names:
        out = given.get(name)
        if out is None:
            binding.bind_output(name, device_type, device_id)
        else:
            binding.bind_output(name, device_type, device_id, out.dtype.type, list(out.shape), address(out))
    session.run_with_iobinding(binding, run_options(synchronize=synchronize))
    values = binding.get_outputs()
    return [given[n] if n in given else device_array(cupy, v) for n, v in zip(output_names, values, strict=True)]
