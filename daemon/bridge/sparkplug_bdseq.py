"""The Sparkplug bdSeq kept across bridge restarts: `<[bridge] state_dir>/sparkplug.json`.

bdSeq goes up by one (mod 256) with every MQTT CONNECT; a host application pairs each NDEATH with
the NBIRTH of the same bdSeq. Starting again at 0 with every process would let a host take the new
session's NBIRTH for the one an old, delayed NDEATH belongs to, so the last bdSeq used is written
(atomically and durably, `daemon.core.durable`) before each CONNECT and read when the bridge starts.
The file names the node (`group_id`, `edge_node_id`): a file of another node is not continued, and a
node without a file starts at 0, as the specification asks.

    {"format": 1, "group_id": "plant", "edge_node_id": "line-3", "bd_seq": 17}
"""

from __future__ import annotations

import json
from pathlib import Path

from daemon.core.durable import replace_durably

FORMAT = 1
FILE_NAME = "sparkplug.json"
MODULO = 256
NONE = -1
"""`load`'s answer when no bdSeq was used yet: the next one is 0."""


def path_in(state_dir: Path) -> Path:
    return state_dir / FILE_NAME


def load(path: Path, group_id: str, edge_node_id: str) -> int:
    """The last bdSeq this node used (NONE when the file is missing or is another node's); ValueError
    when the file does not parse, OSError when it cannot be read."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return NONE
    doc = json.loads(data)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(f"not a format {FORMAT} bdSeq file")
    if (doc.get("group_id"), doc.get("edge_node_id")) != (group_id, edge_node_id):
        return NONE
    bd_seq = doc.get("bd_seq")
    if not isinstance(bd_seq, int) or isinstance(bd_seq, bool) or not 0 <= bd_seq < MODULO:
        raise ValueError(f"bd_seq must be an integer 0-{MODULO - 1}")
    return bd_seq


def save(path: Path, group_id: str, edge_node_id: str, bd_seq: int) -> None:
    """Replace the file (atomically and durably); OSError when it cannot be written."""
    doc = {"format": FORMAT, "group_id": group_id, "edge_node_id": edge_node_id, "bd_seq": bd_seq}
    replace_durably(path, json.dumps(doc, separators=(",", ":")).encode())


def following(bd_seq: int) -> int:
    """The bdSeq after `bd_seq` (0 after NONE and after 255)."""
    return (bd_seq + 1) % MODULO


__all__ = ["FILE_NAME", "NONE", "following", "load", "path_in", "save"]
