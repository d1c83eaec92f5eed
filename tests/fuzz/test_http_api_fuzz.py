"""The endpoint's write APIs and snapshot route under fuzzed bodies and paths (tests/support/http_fuzz.py's
endpoint, authenticated, every request with a valid password, `Host` 127.0.0.1 and `application/json`):

- `PUT /api/cameras/{id}/lines`: a valid body (drawn from the lines model's own rules) is applied as
  sent: `200` with it, `GET` returns it, and the drop-in file reads back to it; a body with one known
  defect is `400` naming the defect's key path, and nothing changes (what runs, the drop-in file);
  any JSON or bytes at all get `200` or `400`, consistently;
- `POST /api/models/{size}`: the body is a swap asked of the `ModelSwap` exactly when it is an object
  with an absolute `path` and at most a boolean `allow_new_classes` (`200` with the swap's answer, or
  its `422`); anything else is `400` and asks nothing;
- `GET /snapshots/<path>`: a JPEG inside the directory is served as it is; any other path, whatever
  its dot segments, encodings, slashes and symlinks, gets `404` (or `400`), never a byte of a file
  outside the directory.

The cameras API (`/api/cameras`) and clip paths do not exist yet: their fuzzers belong here once they do.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from daemon.config import lines_dropin
from tests.support.http_fuzz import CAMERA, GOOD_AUTH, SECRET, USER, Endpoint, Reply, endpoint, exchange, request_bytes

SETTINGS = settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
LINES_PATH = f"/api/cameras/{CAMERA}/lines"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Endpoint]:
    yield from endpoint(tmp_path_factory.mktemp("api"), authenticated=True)


def call(served: Endpoint, method: str, target: str, body: bytes = b"") -> Reply:
    headers = [("Host", f"127.0.0.1:{served.port}"), ("Authorization", GOOD_AUTH)]
    if method not in ("GET", "HEAD"):
        headers.append(("Content-Type", "application/json"))
    reply = exchange(served.port, request_bytes(method, target, headers, body))
    assert reply.status is not None and reply.status < 500, f"{reply.status} for {method} {target} {body[:200]!r}"
    return reply


def dropin(served: Endpoint) -> bytes | None:
    path = lines_dropin.path_for(served.lines_dir, CAMERA)
    return path.read_bytes() if path.exists() else None


# -- the lines API ------------------------------------------------------------------------------------

IDS = st.from_regex(r"[A-Za-z][A-Za-z0-9_-]{0,47}", fullmatch=True)
UNIT = st.floats(0.0, 1.0)


@st.composite
def valid_line(draw: st.DrawFn, line_id: str, calibrated: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the line as sent, as the API answers it): a length, a direction across it, unique gate ids."""
    start = [draw(UNIT), draw(UNIT)]
    end = [draw(UNIT), draw(UNIT)]
    lx, ly = end[0] - start[0], end[1] - start[1]
    if math.hypot(lx, ly) < 1e-3:
        end = [1.0 - start[0], 1.0 - start[1]] if math.dist(start, [0.5, 0.5]) > 1e-3 else [0.0, 0.0]
        lx, ly = end[0] - start[0], end[1] - start[1]
    angle = math.atan2(ly, lx) + draw(st.floats(math.radians(20), math.radians(160)))
    scale = draw(st.floats(0.01, 100.0))
    direction = [scale * math.cos(angle), scale * math.sin(angle)]
    ids = draw(st.lists(IDS, max_size=3, unique=True)) if calibrated else []
    gates = [{"id": g, "distance_mm": draw(st.floats(0.001, 1_000_000.0))} for g in ids]
    sent: dict[str, Any] = {"id": line_id, "start": start, "end": end}
    across = abs(ly) > 0.05 * math.hypot(lx, ly)  # the default direction (1, 0) crosses it
    if not (across and draw(st.booleans())):
        sent["direction"] = direction
    if gates or draw(st.booleans()):
        sent["gates"] = gates
    answer = {"id": line_id, "start": start, "end": end, "direction": sent.get("direction", [1.0, 0.0]), "gates": gates}
    return sent, answer


@st.composite
def valid_lines(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    mm_per_px = draw(st.none() | st.floats(1e-6, 1000.0))
    ids = draw(st.lists(IDS, max_size=4, unique=True))
    drawn = [draw(valid_line(i, mm_per_px is not None)) for i in ids]
    sent: dict[str, Any] = {"lines": [s for s, _ in drawn]}
    if mm_per_px is not None or draw(st.booleans()):
        sent["mm_per_px"] = mm_per_px
    return sent, {"mm_per_px": mm_per_px, "lines": [a for _, a in drawn]}


@SETTINGS
@given(valid_lines())
def test_a_valid_lines_body_is_applied_as_sent_and_persisted(
    served: Endpoint, body: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    sent, answer = body
    reply = call(served, "PUT", LINES_PATH, json.dumps(sent).encode())
    assert reply.status == 200, reply.body[:500]
    assert json.loads(reply.body) == answer
    assert json.loads(call(served, "GET", LINES_PATH).body) == answer
    kept = lines_dropin.read(served.lines_dir, CAMERA)
    assert kept is not None and kept.to_json() == answer


KEYS = st.from_regex(r"[a-z_]{1,10}", fullmatch=True)


@st.composite
def broken_lines(draw: st.DrawFn) -> tuple[dict[str, Any], str]:
    """(a valid body with one defect, a fragment of the problem it must bring back)."""
    sent, _answer = draw(valid_lines())
    lines = sent["lines"]
    defects = ["top_key", "mm_per_px", "gates_uncalibrated"]
    if lines:
        defects += ["outside", "line_key", "duplicate", "bad_id", "no_direction", "no_length"]
    defect = draw(st.sampled_from(defects))
    i = draw(st.integers(0, max(0, len(lines) - 1)))
    if defect == "top_key":
        key = draw(KEYS.filter(lambda k: k not in ("lines", "mm_per_px")))
        sent[key] = draw(st.integers() | st.text(max_size=5))
        return sent, f"{key}: unknown key"
    if defect == "mm_per_px":
        sent["mm_per_px"] = draw(st.floats(max_value=0.0) | st.floats(min_value=1000.0, exclude_min=True))
        return sent, "mm_per_px"
    if defect == "gates_uncalibrated":
        gated = next(f"gated{n}" for n in range(9) if all(line["id"] != f"gated{n}" for line in lines))
        gates = [{"id": "g", "distance_mm": 100.0}]
        sent["mm_per_px"] = None
        sent["lines"] = [
            *(dict(line, gates=[]) for line in lines),
            {"id": gated, "start": [0.5, 0.0], "end": [0.5, 1.0], "gates": gates},
        ]
        return sent, "mm_per_px calibration"
    line = lines[i]
    if defect == "outside":
        which = draw(st.sampled_from(["start", "end"]))
        line[which][draw(st.integers(0, 1))] = draw(
            st.floats(max_value=0.0, exclude_max=True) | st.floats(min_value=1.0, exclude_min=True) | st.just(math.nan)
        )
        return sent, f"lines.{i}.{which}"
    if defect == "line_key":
        key = draw(KEYS.filter(lambda k: k not in ("id", "start", "end", "direction", "gates")))
        line[key] = 1
        return sent, f"lines.{i}.{key}: unknown key"
    if defect == "duplicate":
        lines.append(dict(lines[i]))
        return sent, "used twice"
    if defect == "bad_id":
        line["id"] = draw(st.sampled_from(["", "1a", "a b", "a/b", "x" * 49, "é"]))
        return sent, f"lines.{i}.id"
    if defect == "no_direction":
        line["direction"] = [0.0, 0.0]
        return sent, f"lines.{i}.direction"
    line["end"] = list(line["start"])
    return sent, f"lines.{i}"


@SETTINGS
@given(broken_lines())
def test_a_lines_body_with_a_defect_is_refused_by_key_path_and_changes_nothing(
    served: Endpoint, case: tuple[dict[str, Any], str]
) -> None:
    sent, problem = case
    before, file_before = served.current_lines(), dropin(served)
    reply = call(served, "PUT", LINES_PATH, json.dumps(sent).encode())
    assert reply.status == 400, (reply.status, reply.body[:500])
    problems = json.loads(reply.body)["problems"]
    assert any(problem in p for p in problems), (problem, problems)
    assert served.current_lines() == before and dropin(served) == file_before


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=16,
)
LINES_LIKE = st.fixed_dictionaries(
    {"lines": st.lists(st.dictionaries(st.sampled_from(["id", "start", "end", "direction", "gates"]), JSON))},
    optional={"mm_per_px": JSON},
)


@SETTINGS
@given(JSON.map(json.dumps).map(str.encode) | LINES_LIKE.map(json.dumps).map(str.encode) | st.binary(max_size=80))
def test_any_lines_body_is_applied_or_refused_consistently(served: Endpoint, raw: bytes) -> None:
    before, file_before = served.current_lines(), dropin(served)
    reply = call(served, "PUT", LINES_PATH, raw)
    assert reply.status in (200, 400), reply.body[:500]
    answer = json.loads(reply.body)
    if reply.status == 200:
        assert served.current_lines() == answer
        kept = lines_dropin.read(served.lines_dir, CAMERA)
        assert kept is not None and kept.to_json() == answer
    else:
        assert answer["problems"] and all(isinstance(p, str) for p in answer["problems"])
        assert served.current_lines() == before and dropin(served) == file_before
    try:
        json.loads(raw)
    except ValueError:
        assert reply.status == 400 and answer["problems"][0].startswith("(body): not JSON")


# -- the models API -----------------------------------------------------------------------------------

ABSOLUTE = st.text(min_size=0, max_size=30).map(lambda t: "/" + t) | st.sampled_from(
    ["/models/new.onnx", "/models/new.refused", "//x.onnx", "/a/../b.onnx", "/"]
)
MODEL_BODIES = (
    st.fixed_dictionaries({"path": ABSOLUTE}, optional={"allow_new_classes": st.booleans()})
    | st.fixed_dictionaries(
        {"path": JSON | st.text(max_size=10)},
        optional={"allow_new_classes": JSON, "extra": JSON, "Path": JSON},
    )
    | JSON
)


def swap_asked(body: Any) -> tuple[Path, bool] | None:
    """What the contract says the body asks (`api_models`' docstring), None when it is a 400."""
    if not isinstance(body, dict) or set(body) - {"path", "allow_new_classes"}:
        return None
    path, allow = body.get("path"), body.get("allow_new_classes", False)
    if not isinstance(path, str) or not path.startswith("/") or not isinstance(allow, bool):
        return None
    return Path(path), allow


@SETTINGS
@given(st.sampled_from(["640", "0", "99999", "0640", "416"]), MODEL_BODIES)
def test_a_models_body_asks_a_swap_exactly_when_it_is_valid(served: Endpoint, size: str, body: Any) -> None:
    calls = len(served.swap.calls)
    reply = call(served, "POST", f"/api/models/{size}", json.dumps(body).encode())
    answer = json.loads(reply.body)
    asked = swap_asked(body)
    if asked is None:
        assert reply.status == 400 and answer["problems"] == [answer["reason"]], answer
        assert len(served.swap.calls) == calls, "a swap was asked for an invalid body"
        return
    path, allow = asked
    if int(size) not in served.models.sizes:  # no [models] entry of that size: nothing to swap
        assert reply.status == 422 and len(served.swap.calls) == calls, answer
        return
    assert served.swap.calls[calls:] == [(int(size), path, allow, USER)]
    if str(path).endswith(".refused"):
        assert reply.status == 422 and answer["reason"] == f"{path}: refused"
    else:
        assert reply.status == 200 and answer["new"] == path.name and answer["size"] == int(size)


@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=80))
def test_a_models_body_that_is_not_json_is_refused(served: Endpoint, raw: bytes) -> None:
    calls = len(served.swap.calls)
    reply = call(served, "POST", "/api/models/640", raw)
    try:
        asked = swap_asked(json.loads(raw))
    except ValueError:
        asked = None
    if asked is None:
        assert reply.status == 400 and len(served.swap.calls) == calls


# -- snapshot paths -----------------------------------------------------------------------------------

PIECES = st.sampled_from(
    [
        "..",
        ".",
        "",
        "a.jpg",
        CAMERA,
        "2026-12-06",
        "1.jpg",
        "in.jpg",
        "out.jpg",
        "outdir",
        "b.jpg",
        "secret.jpg",
        "notes.txt",
        "snapshots",
        "%2e%2e",
        "%2E%2E",
        "%2e",
        "..%2f",
        "%2f",
        "%2F..%2Fsecret.jpg",
        "%00",
        "a.jpg%00.jpg",
        "..\\secret.jpg",
        "~",
        "%252e%252e",
        "..;",
        ";a.jpg",
    ]
) | st.text(st.sampled_from("abc.%/\\;~2eEf0"), max_size=8)
PREFIXES = st.sampled_from(
    ["/snapshots/", "/snapshots//", "/snapshots/./", "http://127.0.0.1/snapshots/", "/snapshots%2f"]
)


def check_snapshot(served: Endpoint, reply: Reply, name: str | None) -> None:
    """`name` (a path inside the directory, plainly written) is served as it is; nothing else is."""
    assert SECRET not in reply.raw, "a file outside the snapshot directory was served"
    if name is not None:
        want = served.snapshots.inside.get(name)
        assert (reply.status, reply.body) == ((200, want) if want is not None else (404, reply.body))
    elif reply.status == 200:
        assert reply.body in served.snapshots.inside.values()
    else:
        assert reply.status in (400, 404), reply.status


@SETTINGS
@given(PREFIXES, st.lists(PIECES, min_size=1, max_size=6).map("/".join), st.sampled_from(["", "?x=1", "#f"]))
def test_a_snapshot_path_never_leads_out_of_the_directory(served: Endpoint, prefix: str, rest: str, tail: str) -> None:
    reply = call(served, "GET", prefix + rest + tail)
    check_snapshot(served, reply, None)


def test_each_snapshot_inside_is_served_and_each_path_leading_out_is_not(served: Endpoint) -> None:
    for name in [*served.snapshots.inside, *served.snapshots.leading_out, "missing.jpg", f"{CAMERA}/2026-12-06"]:
        check_snapshot(served, call(served, "GET", f"/snapshots/{name}"), name)
