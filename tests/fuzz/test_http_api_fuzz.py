"""The endpoint's write APIs and snapshot route under fuzzed bodies and paths (tests/support/http_fuzz.py's
endpoint, authenticated, every request with a valid password, `Host` 127.0.0.1 and `application/json`):

- `PUT /api/cameras/{id}/lines`: a valid body (drawn from the lines model's own rules) is applied as
  sent: `200` with it, `GET` returns it, and the drop-in file reads back to it; a body with one known
  defect is `400` naming the defect's key path, and nothing changes (what runs, the drop-in file);
  any JSON or bytes at all get `200` or `400`, consistently;
- `POST /api/models/{size}`: the body is a swap asked of the `ModelSwap` exactly when it is an object
  with an absolute `path` and at most a boolean `allow_new_classes` (`200` with the swap's answer, or
  its `422`); anything else is `400` and asks nothing;
- `PUT /api/cameras/{id}` (cameras of a closed loopback port: each added one runs a real reader,
  which only fails to connect): a valid body (drawn from the camera model's rules, lines included) is
  applied as sent: `201` or `200` with it, `GET` returns it with the URL's password redacted (and
  the password is in no answer), `/api/cameras` lists it so, and its drop-in reads back to it; a
  removed one is `404` with its removal marked; a body with one known defect (a wrong type, a value
  out of bounds, an unknown key, an id other than the path's, bad lines) is `400` naming its key path
  and changes nothing (every camera's view, the listing, the drop-in files); any JSON or bytes at all
  get `200`/`201` with exactly the camera the model reads from them, or `400` and no change;
- `GET /snapshots/<path>` and `GET /clips/<path>`: a file inside the directory is served as it is
  (a clip whole, and by any range: `206` with its bytes and `Content-Range`, `416` past the end);
  any other path, whatever its dot segments, encodings, slashes, NUL, length and symlinks, gets
  `404` (or `400`), never a byte of a file outside the directory.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from daemon.config import cameras_dropin, lines_dropin
from daemon.config.cameras import CameraConfig
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


# -- the cameras API ----------------------------------------------------------------------------------

CAMERA_IDS = st.sampled_from(["c1", "c2", "x.y-Z_9"])  # few: each camera added runs a reader until removed
FIELDS = frozenset(CameraConfig.model_fields)
PASSWORDS = st.text(st.sampled_from("ABCxyz019-._~!$*+,;="), min_size=6, max_size=12).map(lambda t: "Pw" + t)


@st.composite
def camera_url(draw: st.DrawFn) -> tuple[str, str]:
    """(a URL of a closed loopback port, as the API shows it): no stream is ever opened."""
    scheme, path = draw(st.sampled_from(["rtsp", "rtsps"])), draw(st.from_regex(r"[a-z0-9]{0,8}", fullmatch=True))
    user = draw(st.none() | st.from_regex(r"[a-z]{1,5}", fullmatch=True))
    if user is None:
        url = f"{scheme}://127.0.0.1:1/{path}"
        return url, url
    password = draw(st.none() | PASSWORDS)
    if password is None:
        url = f"{scheme}://{user}@127.0.0.1:1/{path}"
        return url, url
    return f"{scheme}://{user}:{password}@127.0.0.1:1/{path}", f"{scheme}://{user}:***@127.0.0.1:1/{path}"


OPTIONAL_KEYS: dict[str, st.SearchStrategy[Any]] = {
    "enabled": st.booleans(),
    "transport": st.sampled_from(["tcp", "udp"]),
    "open_timeout_s": st.floats(0.05, 5.0),
    "read_timeout_s": st.floats(0.05, 5.0),
    "stall_s": st.floats(0.01, 600.0),
    "decode_threads": st.integers(0, 16),
    "reconnect_max_s": st.floats(0.5, 60.0),
    "realtime": st.booleans(),
    "loop": st.booleans(),
    "conf_threshold": st.none() | st.floats(0.0, 1.0),
    "classes": st.none() | st.lists(st.text(max_size=8), max_size=3),
    "shard": st.none() | st.just(0),  # one shard on this endpoint
    "tracking": st.none() | st.booleans(),
    "model": st.none() | st.sampled_from([416, 640, 800]),  # the endpoint's [models]
}


@st.composite
def valid_camera(draw: st.DrawFn, camera_id: str) -> tuple[dict[str, Any], dict[str, Any], str]:
    """(the body as sent, the camera as the API shows it but `source`, the URL as given)."""
    url, shown = draw(camera_url())
    keys = draw(st.lists(st.sampled_from(sorted(OPTIONAL_KEYS)), unique=True))
    sent: dict[str, Any] = {"url": url, **{k: draw(OPTIONAL_KEYS[k]) for k in keys}}
    if draw(st.booleans()):
        sent["id"] = camera_id
    lines = None
    if draw(st.booleans()):
        body, lines = draw(valid_lines())
        sent.update(body)
    view = {name: field.get_default(call_default_factory=True) for name, field in CameraConfig.model_fields.items()}
    view |= {k: v for k, v in sent.items()} | {"id": camera_id, "url": shown}
    if lines is not None:
        view |= lines
    view["runs"] = view["enabled"]
    return sent, view, url


def camera_files(served: Endpoint) -> dict[str, bytes]:
    d = served.cameras_dir
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())} if d.exists() else {}


def camera_state(served: Endpoint) -> tuple[Any, ...]:
    """Everything a refused write must leave as it was: the views, the listing, the drop-ins."""
    return served.camera_views(), json.loads(call(served, "GET", "/api/cameras").body), camera_files(served)


def camera_path(camera_id: str) -> str:
    return f"/api/cameras/{camera_id}"


@SETTINGS
@given(st.data())
def test_a_valid_camera_body_is_applied_as_sent_and_persisted(served: Endpoint, data: st.DataObject) -> None:
    camera_id = data.draw(CAMERA_IDS)
    sent, view, url = data.draw(valid_camera(camera_id))
    was = served.camera_views().get(camera_id)
    existed = was is not None
    if was is not None and was["runs"] and not {"lines", "mm_per_px"} & sent.keys():
        view |= {"lines": was["lines"], "mm_per_px": was["mm_per_px"]}  # what the line editor set is kept
    reply = call(served, "PUT", camera_path(camera_id), json.dumps(sent).encode())
    assert reply.status == (200 if existed else 201), reply.body[:500]
    dropin_path = cameras_dropin.path_for(served.cameras_dir, camera_id)
    view["source"] = f"drop-in {dropin_path}"
    assert json.loads(reply.body) == view
    assert json.loads(call(served, "GET", camera_path(camera_id)).body) == view
    listed = {c["id"]: c for c in json.loads(call(served, "GET", "/api/cameras").body)["cameras"]}
    assert (listed[camera_id]["url"], listed[camera_id]["enabled"], listed[camera_id]["source"]) == (
        view["url"],
        view["enabled"],
        view["source"],
    )
    kept, sources = cameras_dropin.with_dropins([], served.cameras_dir)
    again = {c.id: c for c in kept}[camera_id]
    assert again.url.get_secret_value() == url and sources[camera_id] == view["source"]
    assert again.model_dump(mode="json") | {"url": view["url"], "runs": view["runs"], "source": view["source"]} == view
    password = urlsplit(url).password
    assert password is None or password.encode() not in reply.raw, "the URL's password in an answer"
    if data.draw(st.booleans()):  # and removed: 404 from then on, its drop-in gone, its removal marked
        assert json.loads(call(served, "DELETE", camera_path(camera_id)).body) == {"removed": camera_id}
        assert call(served, "GET", camera_path(camera_id)).status == 404
        assert not dropin_path.exists() and cameras_dropin.removed_mark(served.cameras_dir, camera_id).exists()
        assert call(served, "DELETE", camera_path(camera_id)).status == 404


NOT_A_BOOL = st.sampled_from([[1], {}, "maybe", 2, 0.5])
WRONG: dict[str, st.SearchStrategy[Any]] = {  # values of no coercible type: wrong whatever pydantic's lax mode allows
    "url": st.sampled_from([123, None, [], {}, True, "http://127.0.0.1/x", "gige://"]),
    "enabled": NOT_A_BOOL,
    "realtime": NOT_A_BOOL,
    "transport": st.sampled_from(["sctp", "TCP ", 1, None]),
    "open_timeout_s": st.sampled_from(["abc", [], {}, 0, -1.0, math.nan]),
    "read_timeout_s": st.floats(max_value=0.0) | st.sampled_from(["x", []]),
    "stall_s": st.floats(max_value=0.0),
    "decode_threads": st.integers(17) | st.integers(max_value=-1) | st.sampled_from([1.5, "x", []]),
    "reconnect_max_s": st.floats(max_value=0.5, exclude_max=True),
    "conf_threshold": st.floats(min_value=1.0, exclude_min=True) | st.floats(max_value=0.0, exclude_max=True),
    "classes": st.sampled_from(["part", 1, {"a": 1}, [[]], [1]]),
    "shard": st.integers(1, 99) | st.integers(max_value=-1),  # 1 and above: this endpoint has one shard
    "model": st.sampled_from([123, 0, 1024, -640, "big"]),
    "mm_per_px": st.floats(max_value=0.0) | st.floats(min_value=1000.0, exclude_min=True),
    "password_file": st.sampled_from([1, [], {}]),
    "gige": st.just({"frame_rate": 10}),  # for gige:// cameras only
}


@st.composite
def broken_camera(draw: st.DrawFn, camera_id: str) -> tuple[dict[str, Any], str]:
    """(a valid body with one defect, the key path its problem must name)."""
    sent, _view, _url = draw(valid_camera(camera_id))
    defect = draw(st.sampled_from(["wrong", "unknown", "id", "lines"]))
    if defect == "wrong":
        key = draw(st.sampled_from(sorted(WRONG)))
        sent[key] = draw(WRONG[key])
        return sent, key if key != "gige" else "(top level)"
    if defect == "unknown":
        key = draw(KEYS.filter(lambda k: k not in FIELDS))
        sent[key] = draw(JSON)
        return sent, f"{key}: unknown key"
    if defect == "id":
        sent["id"] = draw(IDS.filter(lambda i: i != camera_id) | st.sampled_from(["", "a/b", 1, None]))
        return sent, "id: "
    body, problem = draw(broken_lines())
    assume(not problem.endswith(": unknown key") or problem.startswith("lines."))  # a top key may be a camera's
    sent.pop("mm_per_px", None)
    sent.update(body)
    return sent, "~" + problem  # a fragment of the lines' problem (some are the model's, at its top level)


@SETTINGS
@given(st.data())
def test_a_camera_body_with_a_defect_is_refused_by_key_path_and_changes_nothing(
    served: Endpoint, data: st.DataObject
) -> None:
    camera_id = data.draw(CAMERA_IDS)
    sent, problem = data.draw(broken_camera(camera_id))
    before = camera_state(served)
    reply = call(served, "PUT", camera_path(camera_id), json.dumps(sent).encode())
    assert reply.status == 400, (reply.status, reply.body[:500])
    problems = json.loads(reply.body)["problems"]
    found = (problem[1:] in p if problem.startswith("~") else p.startswith(problem) for p in problems)
    assert any(found), (problem, problems)
    assert camera_state(served) == before


@st.composite
def camera_like(draw: st.DrawFn) -> bytes:
    """A valid camera body (of any of the ids) with up to two keys given any JSON value: near-valid bodies."""
    sent, _view, _url = draw(valid_camera(draw(CAMERA_IDS)))
    for _ in range(draw(st.integers(0, 2))):
        sent[draw(st.sampled_from(sorted(FIELDS | {"colour"})))] = draw(JSON)
    return json.dumps(sent).encode()


@SETTINGS
@given(
    CAMERA_IDS,
    JSON.map(json.dumps).map(str.encode) | camera_like() | st.binary(max_size=80),
)
def test_any_camera_body_is_applied_or_refused_consistently(served: Endpoint, camera_id: str, raw: bytes) -> None:
    before = camera_state(served)
    existed = before[0].get(camera_id) is not None
    reply = call(served, "PUT", camera_path(camera_id), raw)
    assert reply.status in (200, 201, 400), reply.body[:500]
    answer = json.loads(reply.body)
    if reply.status == 400:
        assert answer["problems"] and all(isinstance(p, str) for p in answer["problems"])
        assert camera_state(served) == before
        return
    assert reply.status == (200 if existed else 201)
    sent, was = json.loads(raw), before[0].get(camera_id)
    if was is not None and was["runs"] and not {"lines", "mm_per_px"} & sent.keys():
        sent |= {"lines": was["lines"], "mm_per_px": was["mm_per_px"]}  # what the line editor set is kept
    camera = CameraConfig.model_validate({"id": camera_id, **sent})  # what was applied is what was sent
    assert answer == served.camera_views()[camera_id] == json.loads(call(served, "GET", camera_path(camera_id)).body)
    assert answer["url"] == camera.safe_url() and answer["id"] == camera_id
    kept = {c.id: c for c in cameras_dropin.with_dropins([], served.cameras_dir)[0]}[camera_id]
    assert kept == camera
    others = {k: v for k, v in before[0].items() if k != camera_id}
    assert {k: v for k, v in served.camera_views().items() if k != camera_id} == others


# -- clip paths ---------------------------------------------------------------------------------------

CLIP_PIECES = PIECES | st.sampled_from(
    ["a.mp4", "1.mp4", "in.mp4", "out.mp4", "secret.mp4", "b.mp4", "clips", "a.mp4%00", "%2e%2e%2fsecret.mp4"]
)
CLIP_PREFIXES = st.sampled_from(
    ["/clips/", "/clips//", "/clips/./", "http://127.0.0.1/clips/", "/clips%2f", "/clips/%2f"]
)


def check_clip(served: Endpoint, reply: Reply, name: str | None) -> None:
    """`name` (a path inside the directory, plainly written) is served whole; nothing else is."""
    assert SECRET not in reply.raw, "a file outside the clips directory was served"
    if name is not None:
        want = served.clips.inside.get(name)
        assert (reply.status, reply.body) == ((200, want) if want is not None else (404, reply.body))
        if want is not None:
            assert reply.headers["content-type"] == "video/mp4" and reply.headers["accept-ranges"] == "bytes"
    elif reply.status == 200:
        assert reply.body in served.clips.inside.values()
    else:
        assert reply.status in (400, 404), reply.status


@SETTINGS
@given(
    CLIP_PREFIXES,
    st.lists(CLIP_PIECES, min_size=1, max_size=6).map("/".join) | st.text(max_size=300).map(lambda t: t + ".mp4"),
    st.sampled_from(["", "?x=1", "#f"]),
)
def test_a_clip_path_never_leads_out_of_the_directory(served: Endpoint, prefix: str, rest: str, tail: str) -> None:
    target = prefix + rest + tail
    assume(all(c not in target for c in "\r\n ") and target.isascii())  # a request line's own limits
    check_clip(served, call(served, "GET", target), None)


def test_each_clip_inside_is_served_and_each_path_leading_out_is_not(served: Endpoint) -> None:
    for name in [*served.clips.inside, *served.clips.leading_out, "missing.mp4", "a.jpg", "/" + str(served.clips.root)]:
        check_clip(served, call(served, "GET", f"/clips/{name}"), name)
    long = "/".join(["a" * 128] * 3) + ".mp4"
    check_clip(served, call(served, "GET", f"/clips/{long}"), None)


@SETTINGS
@given(st.data())
def test_a_clip_is_served_by_range(served: Endpoint, data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(served.clips.inside)))
    whole = served.clips.inside[name]
    size = len(whole)
    kind = data.draw(st.sampled_from(["closed", "open", "suffix"]))
    first = data.draw(st.integers(0, size + 10))
    if kind == "closed":
        last = data.draw(st.integers(first, size + 100))
        spec, part = f"{first}-{last}", whole[first : last + 1]
    elif kind == "open":
        spec, part = f"{first}-", whole[first:]
    else:
        n = data.draw(st.integers(1, size + 100))
        spec, part, first = f"-{n}", whole[-n:], max(0, size - n)
    headers = [("Host", f"127.0.0.1:{served.port}"), ("Authorization", GOOD_AUTH), ("Range", f"bytes={spec}")]
    reply = exchange(served.port, request_bytes("GET", f"/clips/{name}", headers, b""))
    assert SECRET not in reply.raw
    if first >= size:
        assert reply.status == 416 and reply.headers["content-range"] == f"bytes */{size}"
        return
    assert reply.status == 206 and reply.body == part, (spec, reply.status, len(reply.body))
    assert reply.headers["content-range"] == f"bytes {first}-{first + len(part) - 1}/{size}"
