"""The spool reader under random damage to a real segment: random bytes appended, the file cut at
any offset, a framed record whose payload is not ours. Opening and reading keeps every intact
record, in order, and nothing else, and never raises."""

from __future__ import annotations

import json
import shutil
import struct
import tempfile
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.publish.spool import Spool
from daemon.publish.spool.record import (
    HEADER,
    KNOWN_VERSIONS,
    MAX_FORMAT_VERSION,
    SEGMENT_HEADER,
    SEGMENT_MAGIC,
    SpoolFormatError,
    encode_record,
)
from tests.support.spool_records import record

RECORDS = [record(i, n_dets=i % 3) for i in range(6)]
ENDS = [len(SEGMENT_HEADER) + sum(len(encode_record(r)) for r in RECORDS[: i + 1]) for i in range(len(RECORDS))]
"""Where each record ends in the segment: a cut at or after it keeps it."""


def _write_segment(directory: Path) -> Path:
    spool = Spool.open(directory, 1 << 20)
    try:
        spool.append(RECORDS)
        spool.flush()
    finally:
        spool.close()
    (segment,) = directory.glob("seg-*.log")
    assert segment.stat().st_size == ENDS[-1]
    return segment


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("spool-fuzz")
    _write_segment(directory)
    return directory


def reopened(pristine: Path, damage: bytes | None, cut: int | None) -> list[tuple[str, int]]:
    """Copy the pristine spool, damage its segment, open it and read everything there is."""
    with tempfile.TemporaryDirectory() as directory:
        target = Path(directory) / "spool"
        shutil.copytree(pristine, target)
        (segment,) = target.glob("seg-*.log")
        if cut is not None:
            with segment.open("r+b") as f:
                f.truncate(cut)
        if damage is not None:
            with segment.open("ab") as f:
                f.write(damage)
        spool = Spool.open(target, 1 << 20)
        try:
            out = spool.read(100)
            spool.commit(len(out))
            return [(r.result.camera_id, r.result.seq) for r in out]
        finally:
            spool.close()


def expected(upto: int) -> list[tuple[str, int]]:
    return [(r.result.camera_id, r.result.seq) for r, end in zip(RECORDS, ENDS, strict=True) if end <= upto]


@settings(max_examples=120)
@given(st.binary(min_size=1, max_size=64))
def test_random_bytes_after_the_records_are_cut_off(pristine: Path, tail: bytes) -> None:
    assert reopened(pristine, tail, None) == expected(ENDS[-1])


@settings(max_examples=120)
@given(st.integers(0, ENDS[-1]), st.binary(max_size=32))
def test_a_segment_cut_anywhere_keeps_exactly_the_records_before_the_cut(pristine: Path, cut: int, tail: bytes) -> None:
    head = (SEGMENT_HEADER[:cut] + tail)[: len(SEGMENT_HEADER)]
    if cut < len(SEGMENT_HEADER) and len(head) == len(SEGMENT_HEADER) and head.startswith(SEGMENT_MAGIC):
        (version,) = struct.unpack("<I", head[len(SEGMENT_MAGIC) :])
        if version not in KNOWN_VERSIONS and 0 < version <= MAX_FORMAT_VERSION:
            # what is left reads exactly as a newer daemon's segment header: refused, untouched
            with pytest.raises(SpoolFormatError):
                reopened(pristine, tail or None, cut)
            return
    assert reopened(pristine, tail or None, cut) == expected(cut)


payload_docs = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=10,
)


@st.composite
def mutated_payloads(draw: st.DrawFn) -> bytes:
    """A real record's JSON with one field replaced or removed, or any JSON, or any bytes."""
    doc = json.loads(encode_record(record(99, n_dets=2))[HEADER.size :])
    choice = draw(st.sampled_from(["replace", "delete", "json", "bytes"]))
    if choice == "replace":
        doc[draw(st.sampled_from(sorted(doc)))] = draw(payload_docs)
    elif choice == "delete":
        del doc[draw(st.sampled_from(sorted(doc)))]
    elif choice == "json":
        doc = draw(payload_docs)
    else:
        return draw(st.binary(max_size=64))
    return json.dumps(doc).encode()


@settings(max_examples=120)
@given(mutated_payloads())
def test_a_framed_record_that_is_not_ours_is_skipped_or_read_never_raised(pristine: Path, payload: bytes) -> None:
    framed = HEADER.pack(len(payload), zlib.crc32(payload)) + payload
    got = reopened(pristine, framed, None)
    assert got[: len(RECORDS)] == expected(ENDS[-1])
    assert len(got) <= len(RECORDS) + 1  # a payload that still decodes (the reader is lenient) is one record
