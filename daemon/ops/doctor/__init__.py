"""`beltsight doctor`: proves where inference will run on this machine, and says what is missing.

`command` (`run_doctor`: the report printed, the exit code), `report` (`doctor_report`: each
configured model loaded, the providers its session got, memory before and after a warm-up),
`gpu` (NVML, hardware decode, CuPy's CUDA against ONNX Runtime's, TensorRT caches).

May import: `daemon.core`, `daemon.config` and the stage rooms. Entry point: `run_doctor`
(re-exported here).
"""

from daemon.ops.doctor.command import run_doctor

__all__ = ["run_doctor"]
