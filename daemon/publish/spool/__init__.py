"""The disk spool: an append-only FIFO of stream entries for outages longer than memory allows.

`store.Spool` is the entry point (its module docstring holds the layout, the durability policy
and recovery); `writer` does the file I/O on a thread of its own, `record` is the on-disk record
and segment format, `recovery` opens a directory after any end of the previous run.
"""

from daemon.publish.spool.store import Spool

__all__ = ["Spool"]
