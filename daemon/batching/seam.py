"""The batching room's public seam: what the lab (`tools/`) may use of `daemon.batching`.

One `seam` per room (see `daemon.core.seam` and `PUBLIC_SEAMS` in tests/test_architecture.py):
`BatchPolicy`, the batch size and deadline the benches pick lanes with.
"""

from daemon.batching.batcher import BatchPolicy

__all__ = ["BatchPolicy"]
