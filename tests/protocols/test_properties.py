"""Property-based tests: random bytes, random chunk splits and mangled events thrown at every
decoder, from the framing layers up to whole exchanges over the recorded corpus.

The properties:

- the low-level decoders (SSE, content codings, the JSON array splitter, `parse_json`) let
  no exception out but `DecodeError`;
- `Fold.feed`/`Fold.result`, `decode_body` and `decode_request` never raise on any JSON value,
  and what they decode keeps the canonical invariants;
- `ExchangeDecoder.feed`/`finish` never raise and the record's `to_dict()` is JSON;
- a stream fed in any split decodes to the same record as fed whole, also when it was cut
  or had bytes flipped;
- SSE events written with any mix of line ends, and bodies written with any coding, come
  back as they were.

Runs are derandomized and database-less, so CI sees the same examples every time.
"""

from __future__ import annotations

import copy
import gzip
import json
import zlib
from collections.abc import Callable
from typing import Any

import brotli
import pytest
from backports import zstd
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from llmtap.protocols import ExchangeDecoder
from llmtap.protocols.budget import ExchangeBudget
from llmtap.protocols.canonical import Exchange
from llmtap.protocols.common import parse_json
from llmtap.protocols.content import ContentDecoder
from llmtap.protocols.contract import Translator
from llmtap.protocols.errors import DecodeError
from llmtap.protocols.eventstream import EventStreamDecoder, payload_event
from llmtap.protocols.exchange import TRANSLATORS
from llmtap.protocols.jsonarray import JSONArraySplitter
from llmtap.protocols.sse import SSEDecoder, SSEEvent
from llmtap.protocols.vocabulary import FINISH_REASONS
from tests.corpus_tools import CORPUS_NEXT
from tests.protocols.corpus import Case, load_cases
from tests.protocols.test_fixtures import load_fixtures

PROPS = settings(
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
FEW, SOME, MANY = 60, 120, 250  # examples per property, sized for ~30 s on 2 cores


def props(examples: int) -> settings:
    return settings(PROPS, max_examples=examples)


CASES = load_cases()


# -- what the corpus holds, parsed once ----------------------------------------------------


def _sse_events(body: bytes) -> list[tuple[str, Any]]:
    decoder = SSEDecoder()
    events = decoder.decode(body) + decoder.flush()
    return [(e.event, json.loads(e.data)) for e in events if e.data.strip() not in ("", "[DONE]")]


def _array_case(case: Case) -> Case:
    """A Gemini SSE case re-framed as the streamed JSON array sent without `alt=sse`."""
    elements = [json.dumps(obj).encode() for _, obj in _sse_events(case.response)]
    meta = dict(case.case, path=case.case["path"].split("?")[0], content_type="application/json")
    return Case(f"{case.id}_as_array", meta, b"[" + b",\r\n".join(elements) + b"]", case.request)


def _stream_events(case: Case) -> list[tuple[str, Any]]:
    if case.case.get("framing") != "aws-eventstream":
        return _sse_events(case.response)
    messages = EventStreamDecoder().decode(case.response)
    return [payload_event(m, case.id)[::-1] for m in messages if m.message_type == "event"]


STREAMS = [c for c in CASES if c.case["streamed"]]
ARRAYS = [_array_case(c) for c in STREAMS if c.case["protocol"] == "gemini.generate"]
EXCHANGES = CASES + ARRAYS
STREAM_EVENTS: dict[str, list[list[tuple[str, Any]]]] = {p: [] for p in TRANSLATORS}
BODIES: dict[str, list[dict[str, Any]]] = {p: [] for p in TRANSLATORS}
REQUESTS: dict[str, list[tuple[str, dict[str, Any]]]] = {p: [] for p in TRANSLATORS}

# The recorded corpus, and where it lacks a protocol's bodies, events or requests, the next
# corpus (Bedrock's Converse) and the hand-made fixtures (Interactions' requests): without
# them the sweeps below ran over nothing for those protocols.
for _case in CASES + load_cases(CORPUS_NEXT):
    _protocol = _case.case["protocol"]
    if _case.case["streamed"]:
        STREAM_EVENTS[_protocol].append(_stream_events(_case))
    else:
        BODIES[_protocol].append(json.loads(_case.response))
    if _case.request:
        REQUESTS[_protocol].append((_case.case["path"], json.loads(_case.request)))
for _fixture in load_fixtures():
    if _fixture.request is not None:
        REQUESTS[_fixture.meta["protocol"]].append((_fixture.meta["path"], json.loads(_fixture.request)))
PATHS = sorted({c.case["path"] for c in CASES}) or ["/v1/messages"]


def _vocabulary(protocols: list[str]) -> tuple[list[str], list[str]]:
    """Every key and short string the corpus holds for `protocols`, so random JSON speaks
    their words; plus names our folds use or once kept in the body, which a server could send too."""
    keys = {"_llmtap_raw_input", "_llmtap_raw_arguments", "_llmtap_truncated", "_text"}
    strings = {"error", "message_stop", "response.failed", "incomplete", "interaction.completed"}
    stack: list[Any] = []
    for protocol in protocols:
        stack += [e for events in STREAM_EVENTS[protocol] for _, e in events]
        stack += BODIES[protocol] + [r for _, r in REQUESTS[protocol]]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            keys.update(value)
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, str) and len(value) <= 40:
            strings.add(value)
    return sorted(keys), sorted(strings)


# -- strategies ----------------------------------------------------------------------------


class Words:
    """Random JSON built from one vocabulary: `json` any value, `objects` any object."""

    def __init__(self, protocols: list[str]) -> None:
        keys, strings = _vocabulary(protocols)
        self.strings = st.sampled_from(strings)
        scalars = (
            st.none()
            | st.booleans()
            | st.integers(-2, 8)
            | st.integers()
            | st.floats(allow_nan=False, allow_infinity=False)
            | self.strings
            | st.text(max_size=12)
        )
        key = st.sampled_from(keys) | st.text(max_size=8)
        self.json = st.recursive(
            scalars,
            lambda inner: st.lists(inner, max_size=4) | st.dictionaries(key, inner, max_size=6),
            max_leaves=30,
        )
        self.objects = st.dictionaries(key, self.json, max_size=8)


WORDS = {protocol: Words([protocol]) for protocol in TRANSLATORS}
ANY = Words(list(TRANSLATORS))
JSON, OBJECTS = ANY.json, ANY.objects

ODD = st.sampled_from([None, True, 0, -1, 2.5, "", "x", [], {}, [None], [[]], {"": {}}]).map(copy.deepcopy) | JSON


def _edit(draw: st.DrawFn, root: dict[str, Any] | list[Any]) -> None:
    """One edit somewhere in `root`, found by a random walk down from the top, so the
    shallow fields the translators read first are edited most often."""
    node: Any = root
    while node:
        key = draw(st.sampled_from(list(node) if isinstance(node, dict) else range(len(node))))
        child = node[key]
        if isinstance(child, (dict, list)) and child and draw(st.booleans()):
            node = child
            continue
        edit = draw(st.sampled_from(["drop", "swap", "swap", "null", "truncate"]))
        if edit == "drop":
            del node[key]
        elif edit == "swap":
            node[key] = draw(ODD)
        elif edit == "null":
            node[key] = None
        elif isinstance(child, (str, list)):
            node[key] = child[: draw(st.integers(0, len(child)))]
        return


@st.composite
def mutated(draw: st.DrawFn, value: Any, max_edits: int = 6) -> Any:
    """`value` with a few edits: keys dropped, values swapped for other types or nulled,
    strings and lists truncated."""
    value = copy.deepcopy(value)
    if isinstance(value, (dict, list)):
        for _ in range(draw(st.integers(1, max_edits))):
            _edit(draw, value)
    return value


def _real_or_random(pool: list[Any], random: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    if not pool:
        return random
    return st.sampled_from(pool).flatmap(mutated) | random


@st.composite
def event_streams(draw: st.DrawFn, protocol: str) -> list[tuple[str, Any]]:
    """A recorded event stream with events mutated, dropped, repeated or inserted."""
    pool = STREAM_EVENTS[protocol]
    events = copy.deepcopy(draw(st.sampled_from(pool))) if pool else []
    for _ in range(draw(st.integers(0, 6))):
        edit = draw(st.sampled_from(["mutate", "drop", "repeat", "insert"]))
        at = draw(st.integers(0, max(len(events) - 1, 0)))
        if edit == "insert" or not events:
            words = WORDS[protocol]
            events.insert(at, (draw(words.strings), draw(words.json)))
        elif edit == "mutate":
            events[at] = (events[at][0], draw(mutated(events[at][1])))
        elif edit == "drop":
            del events[at]
        else:
            events.insert(at, events[at])
    return events


def _split(body: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({0, len(body), *cuts})
    return [body[a:b] for a, b in zip(points, points[1:], strict=False)]


def splits(body: bytes, max_cuts: int = 40) -> st.SearchStrategy[list[bytes]]:
    return st.lists(st.integers(0, len(body)), max_size=max_cuts).map(lambda c: _split(body, c))


def _only_decode_errors(run: Callable[[], Any]) -> Any:
    try:
        return run()
    except DecodeError:
        return None


# -- SSE -----------------------------------------------------------------------------------


def _sse(chunks: list[bytes]) -> list[SSEEvent]:
    decoder = SSEDecoder()
    events = [event for chunk in chunks for event in decoder.decode(chunk)]
    return events + decoder.flush()


@props(MANY)
@given(st.binary(max_size=300), st.data())
def test_sse_random_bytes_any_split(body: bytes, data: st.DataObject) -> None:
    whole = _only_decode_errors(lambda: _sse([body]))
    assert _only_decode_errors(lambda: _sse(data.draw(splits(body)))) == whole


@pytest.mark.parametrize(
    ("wire", "cut", "events"),
    [
        (b"\xef\xbb\xbf\n", 1, 0),  # a BOM alone on the first line (was an IndexError)
        (b"data:x\r\n\revent: e\ndata\n", 17, 2),  # a chunk with a "\r" line end, then half a line
    ],
)
def test_sse_found_by_the_properties(wire: bytes, cut: int, events: int) -> None:
    assert _sse([wire[:cut], wire[cut:]]) == _sse([wire])
    assert len(_sse([wire])) == events


FIELD_TEXT = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\r\n"), max_size=12)
SSE_EVENTS = st.lists(
    st.tuples(
        st.lists(FIELD_TEXT, min_size=1, max_size=3).map("\n".join),
        FIELD_TEXT,
        st.none() | FIELD_TEXT.filter(lambda s: "\0" not in s),
    ),
    max_size=6,
)


@st.composite
def sse_wire(draw: st.DrawFn, events: list[tuple[str, str, str | None]]) -> bytes:
    """`events` as SSE text, each line ended by `\\n`, `\\r\\n` or `\\r` at random."""
    lines = [""] * draw(st.integers(0, 2))  # blank lines before anything dispatch nothing
    for data, name, event_id in events:
        if draw(st.booleans()):
            lines.append(":" + draw(FIELD_TEXT))
        if name:
            lines.append("event: " + name)
        if event_id is not None:
            lines.append("id: " + event_id)
        for line in data.split("\n"):
            bare = not line.startswith(" ") and draw(st.booleans())
            lines.append(("data:" if bare else "data: ") + line if line or bare else "data")
        lines.append("")
    if lines and lines[-1] == "" and events and draw(st.booleans()):
        lines.pop()  # the last event without its blank line: flush() must dispatch it
    out, previous = [], ""
    for line in lines:
        end = draw(st.sampled_from(["\n", "\r\n", "\r"]))
        if previous == "\r" and not line and end == "\n":
            end = "\r\n"  # "\r" + "\n" would read as one line end, eating the blank line
        out.append(line + end)
        previous = end
    bom = "\ufeff" if draw(st.booleans()) else ""
    return (bom + "".join(out)).encode()


@props(MANY)
@given(SSE_EVENTS, st.data())
def test_sse_round_trip(events: list[tuple[str, str, str | None]], data: st.DataObject) -> None:
    wire = data.draw(sse_wire(events))
    expected, last_id = [], None
    for event_data, name, event_id in events:
        last_id = event_id if event_id is not None else last_id
        expected.append(SSEEvent(event_data, name, last_id))
    assert _sse(data.draw(splits(wire))) == expected


# -- content codings -----------------------------------------------------------------------


def _raw_deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


ENCODERS: dict[str, Callable[[bytes], bytes]] = {
    "identity": lambda d: d,
    "gzip": gzip.compress,
    "deflate": zlib.compress,
    "br": brotli.compress,
    "zstd": zstd.compress,
}
HEADERS = st.sampled_from(["identity", "gzip", "x-gzip", "deflate", "br", "zstd", "gzip, br", "zstd,gzip"])


def _encode(header: str, data: bytes) -> bytes:
    for name in [n.strip() for n in header.split(",")]:
        data = ENCODERS["gzip" if name == "x-gzip" else name](data)
    return data


def _content(header: str, chunks: list[bytes], max_decoded: int | None = None) -> bytes:
    decoder = ContentDecoder(header) if max_decoded is None else ContentDecoder(header, max_decoded)
    return b"".join(decoder.decode(chunk) for chunk in chunks) + decoder.flush()


@props(SOME)
@given(HEADERS, st.binary(max_size=2000), st.data())
def test_content_round_trip_in_any_split(header: str, payload: bytes, data: st.DataObject) -> None:
    body = _encode(header, payload)
    assert _content(header, data.draw(splits(body))) == payload


@props(FEW)
@given(st.binary(max_size=2000), st.data())
@example(b"", None).via("the 2-byte body split after its first byte")
def test_content_deflate_without_zlib_header(payload: bytes, data: st.DataObject | None) -> None:
    body = _raw_deflate(payload)
    chunks = data.draw(splits(body)) if data else [body[:1], body[1:]]
    assert _content("deflate", chunks) == payload


@props(MANY)
@given(HEADERS | st.text(max_size=12), st.binary(max_size=500), st.data())
def test_content_random_bytes_raise_only_decode_error(header: str, body: bytes, data: st.DataObject) -> None:
    _only_decode_errors(lambda: _content(header, data.draw(splits(body))))


@props(MANY)
@given(HEADERS, st.binary(min_size=1, max_size=2000), st.data())
def test_content_corrupt_or_truncated_raise_only_decode_error(header: str, payload: bytes, data: st.DataObject) -> None:
    body = bytearray(_encode(header, payload))
    for at in data.draw(st.lists(st.integers(0, len(body) - 1), max_size=4)):
        body[at] ^= data.draw(st.integers(1, 255))
    body = body[: data.draw(st.integers(0, len(body)))]
    _only_decode_errors(lambda: _content(header, data.draw(splits(bytes(body)))))


@props(FEW)
@given(HEADERS, st.integers(1, 4000), st.integers(0, 3000))
def test_content_output_is_bounded(header: str, size: int, limit: int) -> None:
    out = _only_decode_errors(lambda: _content(header, [_encode(header, b"\0" * size)], limit))
    assert (out is None) == (size > limit)


# -- the streamed JSON array ---------------------------------------------------------------


def _array(chunks: list[bytes]) -> tuple[list[str], JSONArraySplitter]:
    splitter = JSONArraySplitter()
    return [element for chunk in chunks for element in splitter.decode(chunk)], splitter


@props(MANY)
@given(st.binary(max_size=300) | st.text(alphabet='[]{},"\\ \r\nab:1', max_size=60).map(str.encode), st.data())
def test_array_random_bytes_raise_only_decode_error(body: bytes, data: st.DataObject) -> None:
    _only_decode_errors(lambda: _array(data.draw(splits(body))))


@props(SOME)
@given(st.lists(OBJECTS | st.lists(JSON, max_size=3), max_size=5), st.data())
def test_array_round_trip_in_any_split(elements: list[Any], data: st.DataObject) -> None:
    gaps = st.sampled_from([",", ",\r\n", " , ", "\n,\t"])
    body = " [" if elements else "["
    for i, element in enumerate(elements):
        body += (data.draw(gaps) if i else "") + json.dumps(element, ensure_ascii=data.draw(st.booleans()))
    wire = (body + "]").encode()
    got, splitter = _array(data.draw(splits(wire)))
    assert [json.loads(e) for e in got] == elements
    assert splitter.closed and not splitter.pending


@props(MANY)
@given(st.binary(max_size=200) | st.text(max_size=60) | JSON.map(json.dumps))
def test_parse_json_raises_only_decode_error(data: bytes | str) -> None:
    _only_decode_errors(lambda: parse_json(data, "x"))


# -- folds, decode_body, decode_request ----------------------------------------------------


def _check_record(ex: Exchange) -> None:
    """The canonical invariants any decoded record keeps, however odd its input."""
    assert ex.finish_reason is None or ex.finish_reason in FINISH_REASONS
    assert isinstance(ex.text, str)
    for call in ex.tool_calls:
        assert isinstance(call.arguments_raw, str)
        assert call.valid_json == isinstance(call.arguments, dict)
        assert call.id is None or isinstance(call.id, str)
    json.dumps(ex.to_dict())


def _fold(module: Translator, events: list[tuple[str, Any]], budget: int) -> Exchange:
    allowance = ExchangeBudget()
    allowance.kept = budget
    fold = module.Fold(allowance)
    for name, event in events:
        fold.feed(event, name)
    ex = Exchange(protocol=module.PROTOCOL)
    folded = fold.result()
    module.decode_body(folded.body, ex, folded.extras)
    return ex


PROTOCOL_IDS = sorted(TRANSLATORS)
BUDGETS = st.sampled_from([4 * 1024 * 1024, 0, 1, 7])  # kept-text budget, small ones to cut


@pytest.mark.parametrize("protocol", PROTOCOL_IDS)
@props(SOME)
@given(data=st.data())
def test_fold_never_raises_on_mangled_streams(protocol: str, data: st.DataObject) -> None:
    events = data.draw(event_streams(protocol))
    _check_record(_fold(TRANSLATORS[protocol], events, data.draw(BUDGETS)))


@pytest.mark.parametrize("protocol", PROTOCOL_IDS)
@props(SOME)
@given(data=st.data())
def test_fold_never_raises_on_any_json(protocol: str, data: st.DataObject) -> None:
    words = WORDS[protocol]
    events = data.draw(st.lists(st.tuples(words.strings | st.just(""), words.json), max_size=8))
    _check_record(_fold(TRANSLATORS[protocol], events, data.draw(BUDGETS)))


@pytest.mark.parametrize("protocol", PROTOCOL_IDS)
@props(SOME)
@given(data=st.data())
def test_decode_body_never_raises(protocol: str, data: st.DataObject) -> None:
    body = data.draw(_real_or_random(BODIES[protocol], WORDS[protocol].objects))
    ex = Exchange(protocol=protocol)
    TRANSLATORS[protocol].decode_body(body, ex)
    _check_record(ex)


@pytest.mark.parametrize("protocol", PROTOCOL_IDS)
@props(SOME)
@given(data=st.data())
def test_decode_request_never_raises(protocol: str, data: st.DataObject) -> None:
    pool = REQUESTS[protocol]
    path, body = data.draw(st.sampled_from(pool)) if pool else ("", {})
    body = data.draw(_real_or_random([body], WORDS[protocol].objects))
    path = data.draw(st.sampled_from([path, *PATHS]) | st.text(max_size=30))
    facts = TRANSLATORS[protocol].decode_request(body, path)
    json.dumps(Exchange(protocol=protocol, request=facts).to_dict())


# A deterministic sweep complements the random edits: every field of every recorded request,
# body and event kind (to some depth) dropped, swapped for each odd value in turn, and every
# object given the keys our folds use or once kept inside the body.
HOSTILE = [None, True, 0, -1, 2.5, "", "x", [], {}, [None], [[1]], {"": {}}, {"type": 5}]
INTERNAL_KEYS = ("_llmtap_raw_input", "_llmtap_raw_arguments", "_llmtap_truncated", "_text")
_DROP = object()


def _paths(value: Any, depth: int = 6, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The paths of `value`'s slots down to `depth`; of a list, its first and last item."""
    if len(prefix) >= depth or not isinstance(value, (dict, list)) or not value:
        return []
    keys = list(value) if isinstance(value, dict) else sorted({0, len(value) - 1})
    out = []
    for key in keys:
        out.append(prefix + (key,))
        out += _paths(value[key], depth, prefix + (key,))
    return out


def _replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    """`value` with the slot at `path` set to `new` (or dropped), copied along the path only."""
    out = dict(value) if isinstance(value, dict) else list(value)
    head = path[0]
    child = new if len(path) == 1 else _replaced(value[head], path[1:], new)
    if child is _DROP:
        del out[head]
    else:
        out[head] = child
    return out


def _at(value: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        value = value[key]
    return value


def variants(value: Any) -> list[tuple[str, Any]]:
    out = []
    for path in _paths(value):
        out.append((f"drop {path}", _replaced(value, path, _DROP)))
        out += [(f"{path} = {odd!r}", _replaced(value, path, copy.deepcopy(odd))) for odd in HOSTILE]
    for path in [(), *_paths(value)]:
        if isinstance(_at(value, path), dict):
            out += [(f"{path + (key,)} = 5", _replaced(value, path + (key,), 5)) for key in INTERNAL_KEYS]
    return out


def _sweep(samples: list[Any], run: Callable[[Any], Any]) -> list[str]:
    failures = []
    for sample in samples:
        for what, variant in variants(sample):
            try:
                run(variant)
            except Exception as exc:  # noqa: BLE001 - collected and reported below
                failures.append(f"{what}: {exc!r}")
    return sorted(set(failures))


@pytest.mark.parametrize("protocol", PROTOCOL_IDS)
def test_every_request_field_swapped(protocol: str) -> None:
    module = TRANSLATORS[protocol]
    assert REQUESTS[protocol], f"the corpus has no request of {protocol}"
    for path, body in REQUESTS[protocol]:
        failures = _sweep(
            [body],
            lambda b, path=path: json.dumps(
                Exchange(protocol=protocol, request=module.decode_request(b, path)).to_dict()
            ),
        )
        assert failures == [], f"{path}: {failures[:10]}"


@pytest.mark.parametrize("protocol", PROTOCOL_IDS)
def test_every_body_field_swapped(protocol: str) -> None:
    def decode(body: dict[str, Any]) -> None:
        ex = Exchange(protocol=protocol)
        TRANSLATORS[protocol].decode_body(body, ex)
        _check_record(ex)

    assert BODIES[protocol], f"no recorded body of {protocol}"
    assert _sweep(BODIES[protocol], decode)[:10] == []


def _kind(name: str, event: Any) -> Any:
    return str(event.get("type") or event.get("event_type") or name) if isinstance(event, dict) else name


@pytest.mark.parametrize("protocol", PROTOCOL_IDS)
def test_every_event_field_swapped(protocol: str) -> None:
    """Each kind of event, in the shortest recorded stream that has it, with each field
    swapped, and the whole stream folded and decoded around it."""
    where: dict[str, tuple[list[tuple[str, Any]], int]] = {}
    for events in sorted(STREAM_EVENTS[protocol], key=len):
        for i, (name, event) in enumerate(events):
            where.setdefault(_kind(name, event), (events, i))
    assert where, f"no recorded stream of {protocol}"
    failures = []
    for kind, (events, i) in sorted(where.items()):
        name = events[i][0]

        def fold(event: Any, events: list[tuple[str, Any]] = events, i: int = i, name: str = name) -> None:
            _check_record(_fold(TRANSLATORS[protocol], [*events[:i], (name, event), *events[i + 1 :]], 1 << 22))

        failures += [f"{kind}: {f}" for f in _sweep([events[i][1]], fold)]
    assert failures[:10] == []


def _nested(depth: int) -> Any:
    value: Any = {"cache_control": {"type": "ephemeral"}}
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


def _tool_results(depth: int) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "image"}
    for i in range(depth):
        block = {"type": "tool_result", "tool_use_id": f"t{i}", "content": [block]}
    return block


def _from_deep_stack(frames: int, run: Callable[[], Any]) -> Any:
    """`run()` called under `frames` more stack frames, as a hook deep in a proxy would be."""
    return run() if frames == 0 else _from_deep_stack(frames - 1, run)


@pytest.mark.parametrize("protocol", PROTOCOL_IDS)
def test_deeply_nested_json_is_decoded_without_crashing(protocol: str) -> None:
    """Nesting that `json.loads` accepts (about 1,500 levels) but Python recursion does not
    (about 1,000 frames) must not make the request, the response or `to_dict` fail."""
    deep = _nested(1200)
    request = {
        "model": "m",
        "messages": [{"role": "user", "content": [deep, _tool_results(700)]}],
        "input": [{"role": "user", "content": deep}],
        "contents": [{"parts": [deep]}],
        "tools": [deep],
        "tool_choice": deep,
    }
    response = {"usage": deep, "usageMetadata": deep, "content": [{"type": "tool_use", "input": deep}]}
    decoder = ExchangeDecoder(protocol, request=json.dumps(request).encode(), status=200)
    decoder.feed(json.dumps(response).encode())
    record = _from_deep_stack(400, lambda: decoder.finish().to_dict())
    assert record["request"] is not None
    assert "internal error" not in (record["decode_error"] or "")
    json.dumps(record)


# -- whole exchanges over the corpus -------------------------------------------------------


def _exchange(case: Case, chunks: list[bytes], **overrides: Any) -> dict[str, Any]:
    meta = case.case
    options: dict[str, Any] = {
        "request": case.request,
        "path": meta["path"],
        "host": meta["host"],
        "status": meta["status"],
        "content_type": meta.get("content_type"),
    }
    options.update(overrides)
    decoder = ExchangeDecoder(meta["protocol"], **options)
    for chunk in chunks:
        decoder.feed(chunk)
    record = decoder.finish().to_dict()
    json.dumps(record)
    return record


WHOLE = {case.id: _exchange(case, [case.response]) for case in EXCHANGES}


@props(MANY)
@given(st.sampled_from(EXCHANGES or [None]), st.data())
def test_any_split_gives_the_record_of_the_whole(case: Case, data: st.DataObject) -> None:
    assert _exchange(case, data.draw(splits(case.response))) == WHOLE[case.id]


@props(SOME)
@given(st.sampled_from(STREAMS or [None]), st.data())
@example(STREAMS[0] if STREAMS else None, None).via("a one-byte first chunk, no content type")
def test_any_split_without_content_type_sniffs_the_same(case: Case, data: st.DataObject | None) -> None:
    """`llmtap decode` without `--content-type` sniffs the framing from the first bytes;
    however few of them the first chunk holds."""
    chunks = data.draw(splits(case.response)) if data else [case.response[:1], case.response[1:]]
    whole = _exchange(case, [case.response], content_type=None)
    assert whole["streamed"] and whole["decode_error"] is None
    assert _exchange(case, chunks, content_type=None) == whole


@props(FEW)
@given(st.sampled_from(EXCHANGES or [None]), st.sampled_from(["gzip", "br", "zstd", "deflate"]), st.data())
def test_any_split_of_an_encoded_body_gives_the_record_of_the_whole(
    case: Case, header: str, data: st.DataObject
) -> None:
    body = _encode(header, case.response)
    assert _exchange(case, data.draw(splits(body)), content_encoding=header) == WHOLE[case.id]


FLIP_BYTES = st.sampled_from(list(b'\n\r"{}[]:,\\ \x00\xff\xc3')) | st.integers(0, 255)


@st.composite
def damaged(draw: st.DrawFn, body: bytes) -> bytes:
    """`body` cut short and/or with bytes overwritten (framing bytes favoured)."""
    out = bytearray(body[: draw(st.integers(0, len(body)))] if draw(st.booleans()) else body)
    for _ in range(draw(st.integers(0 if len(out) < len(body) else 1, 6)) if out else 0):
        out[draw(st.integers(0, len(out) - 1))] = draw(FLIP_BYTES)
    return bytes(out)


@props(MANY)
@given(st.sampled_from(EXCHANGES or [None]), st.data())
def test_damaged_bodies_give_a_record_in_any_split(case: Case, data: st.DataObject) -> None:
    body = data.draw(damaged(case.response))
    whole = _exchange(case, [body])
    assert _exchange(case, data.draw(splits(body))) == whole


@props(FEW)
@given(st.sampled_from(EXCHANGES or [None]), st.data())
def test_damaged_requests_and_odd_metadata_never_raise(case: Case, data: st.DataObject) -> None:
    request = data.draw(st.none() | st.binary(max_size=50) | damaged(case.request or b"{}"))
    _exchange(
        case,
        data.draw(splits(data.draw(damaged(case.response)))),
        request=request,
        status=data.draw(st.sampled_from([None, 200, 400, 429, 500, 529])),
        content_type=data.draw(st.sampled_from([None, "", "text/event-stream", "application/json"])),
        content_encoding=data.draw(st.sampled_from([None, "", "identity", "gzip", "bogus"])),
    )
