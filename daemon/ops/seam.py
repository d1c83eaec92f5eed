"""The ops room's public seam: what the lab (`tools/`) may use of `daemon.ops`.

One `seam` per room (see `daemon.core.seam` and `PUBLIC_SEAMS` in tests/test_architecture.py): the
logging set-up (`configure_logging`), the ONNX Runtime CUDA version `doctor` reads
(`ort_cuda_version`), and the review store the review bench fills (`Store`, `Crossing`, `Cursor`,
`Filters`; its schema `SCHEMA` and row statement `INSERT`).
"""

from daemon.ops.doctor.gpu import ort_cuda_version
from daemon.ops.logging import configure_logging
from daemon.ops.review.store import INSERT, SCHEMA, Crossing, Cursor, Filters, Store

__all__ = ["INSERT", "SCHEMA", "Crossing", "Cursor", "Filters", "Store", "configure_logging", "ort_cuda_version"]
