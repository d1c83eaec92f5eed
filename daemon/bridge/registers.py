"""The Modbus holding-register map (pure encoding, no I/O).

One block of `block_size` registers per (camera, line), cameras then lines in config order (or as
`daemon.bridge.blocks` kept them: a block never moves, unused ones read 0 but the heartbeat), the
first at `base_register` (protocol address 0 = 4x00001). 32-bit values are high word first and
taken modulo 2**32. About the line's most recent crossing in stream order:

| reg   | value                                                               |
|-------|---------------------------------------------------------------------|
| 0-1   | CountIn (uint32)                                                    |
| 2-3   | CountOut (uint32)                                                   |
| 4-5   | last track id (uint32)                                              |
| 6     | the last crossing's class index (`cls`, modulo 2**16)               |
| 7-8   | the last crossing's time, Unix seconds (uint32)                     |
| 9     | its milliseconds part (0-999)                                       |
| 10-11 | its ETA at the line's first gate, Unix seconds (0 without gates)    |
| 12    | those milliseconds                                                  |
| 13    | heartbeat counter, +1 every second (modulo 2**16), in every block   |
| 14-15 | reserved (0); registers 16.. of a larger block read 0               |
"""

from __future__ import annotations

from collections.abc import Mapping

from daemon.bridge.layout import BridgeLayout
from daemon.bridge.state import LineState

U32 = 1 << 32
U16 = 1 << 16
HEARTBEAT_REGISTER = 13
DEFINED_REGISTERS = 16


def u32_words(value: int) -> tuple[int, int]:
    """(high, low) 16-bit words of `value` modulo 2**32."""
    v = value % U32
    return v >> 16, v & 0xFFFF


def words_u32(high: int, low: int) -> int:
    return (high << 16) | low


def _seconds_ms(unix_ms: int) -> tuple[int, int, int]:
    high, low = u32_words(unix_ms // 1000)
    return high, low, unix_ms % 1000


def encode_line(line: LineState, first_gate: str | None, heartbeat: int) -> list[int]:
    """Registers 0-15 of one line's block."""
    regs = [0] * DEFINED_REGISTERS
    regs[0:2] = u32_words(line.count_in)
    regs[2:4] = u32_words(line.count_out)
    regs[4:6] = u32_words(line.last_track)
    regs[6] = line.last_cls % U16
    regs[7:10] = _seconds_ms(line.last_crossed_ms) if line.last_crossed_ms else (0, 0, 0)
    eta = line.eta.get(first_gate) if first_gate is not None else None
    regs[10:13] = _seconds_ms(eta) if eta else (0, 0, 0)
    regs[HEARTBEAT_REGISTER] = heartbeat % U16
    return regs


class RegisterMap:
    """The registers of every block, kept current by `update_line` and `set_heartbeat`."""

    def __init__(
        self,
        layout: BridgeLayout,
        *,
        base_register: int = 0,
        block_size: int = 16,
        blocks: Mapping[tuple[str, str], int] | None = None,
    ) -> None:
        """`blocks`: each (camera, line)'s block number (`daemon.bridge.blocks`: kept across starts, with
        unused blocks between); None numbers them in the layout's order."""
        self.base = base_register
        self.block_size = block_size
        self._offsets: dict[tuple[str, str], tuple[int, str | None]] = {}
        for index, cam in enumerate((c, line) for c in layout.cameras for line in c.lines):
            camera, line = cam
            number = index if blocks is None else blocks[(camera.id, line.id)]
            self._offsets[(camera.id, line.id)] = (number * block_size, line.gates[0] if line.gates else None)
        count = max((start // block_size + 1 for start, _gate in self._offsets.values()), default=0)
        self.values = [0] * (count * block_size)
        self.heartbeat = 0
        self.loaded = False
        """True once the served state is in the map (the snapshot from Redis, or none there): until then
        the values are placeholders, and Modbus answers reads exception 0x06 (`daemon.bridge.modbus`)."""

    def add(self, camera: str, line: str, block: int, first_gate: str | None) -> None:
        """Serve (camera, line) at `block` from now on (a camera or line added live, daemon.bridge.live);
        the map grows to hold it, every other block stays where it is."""
        start = block * self.block_size
        self._offsets[(camera, line)] = (start, first_gate)
        grown = start + self.block_size - len(self.values)
        if grown > 0:
            self.values.extend([0] * grown)
            self.set_heartbeat(self.heartbeat)

    def blocks(self) -> dict[tuple[str, str], int]:
        """Each served (camera, line)'s block number."""
        return {pair: start // self.block_size for pair, (start, _gate) in self._offsets.items()}

    def __len__(self) -> int:
        return len(self.values)

    def offset(self, camera: str, line: str) -> int:
        """Protocol address of register 0 of (camera, line)'s block."""
        return self.base + self._offsets[(camera, line)][0]

    def update_line(self, camera: str, line_id: str, line: LineState) -> None:
        start, gate = self._offsets[(camera, line_id)]
        self.values[start : start + DEFINED_REGISTERS] = encode_line(line, gate, self.heartbeat)

    def set_heartbeat(self, heartbeat: int) -> None:
        self.heartbeat = heartbeat
        value = heartbeat % U16
        for start in range(0, len(self.values), self.block_size):
            self.values[start + HEARTBEAT_REGISTER] = value

    def read(self, address: int, count: int) -> list[int] | None:
        """Registers [address, address + count), or None when any is outside the map."""
        start = address - self.base
        if start < 0 or count < 1 or start + count > len(self.values):
            return None
        return self.values[start : start + count]
