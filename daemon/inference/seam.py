"""The inference room's public seam: what the lab (`tools/`) may use of `daemon.inference`.

One `seam` per room (see `daemon.core.seam` and `PUBLIC_SEAMS` in tests/test_architecture.py):
model files (`load_model_info`, `ModelInfo`, `ModelError`), sessions (`EngineFactory`, `Engine`,
`ServingEngine`, the `providers` helpers the benches size lanes with), the stage and its batch
(`InferenceStage`, `BatchTensor`, `PostprocessConfig`), post-processing (`decode_batch`, the NMS,
`to_detections`, `source_mapping`), the device path the GPU check measures (`DeviceBatchTensor`,
`LetterboxKernel`, `run_bound`), and the layouts a bench decodes with (`ModelLayout`, `Decode`,
`Candidates`; `dense` and `yolov8` as modules).
"""

from daemon.inference.device_preprocess import DeviceBatchTensor
from daemon.inference.engine import Engine, EngineFactory, InferenceError
from daemon.inference.iobinding import run_bound
from daemon.inference.layouts import dense, yolov8
from daemon.inference.layouts.base import Candidates, Decode, ModelLayout
from daemon.inference.letterbox_kernel import LetterboxKernel
from daemon.inference.model_file import ModelError, ModelInfo, load_model_info
from daemon.inference.postprocess import decode_batch, greedy_nms, grouped_nms, source_mapping, to_detections
from daemon.inference.protocols import InferenceEngine
from daemon.inference.providers import (
    EngineError,
    Placement,
    intra_op_threads,
    lane_workers,
    session_options,
    worker_batch,
)
from daemon.inference.serving import ServingEngine
from daemon.inference.stage import BatchTensor, InferenceStage, PostprocessConfig

__all__ = [
    "BatchTensor",
    "Candidates",
    "Decode",
    "DeviceBatchTensor",
    "Engine",
    "EngineError",
    "EngineFactory",
    "InferenceEngine",
    "InferenceError",
    "InferenceStage",
    "LetterboxKernel",
    "ModelError",
    "ModelInfo",
    "ModelLayout",
    "Placement",
    "PostprocessConfig",
    "ServingEngine",
    "decode_batch",
    "dense",
    "greedy_nms",
    "grouped_nms",
    "intra_op_threads",
    "lane_workers",
    "load_model_info",
    "run_bound",
    "session_options",
    "source_mapping",
    "to_detections",
    "worker_batch",
    "yolov8",
]
