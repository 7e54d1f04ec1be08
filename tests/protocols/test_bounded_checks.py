"""Tool checks that hostile declarations cannot stall (SPEC §5, §6; issue 24): a grammar's
or a JSON Schema's regular expression runs in linear time (RE2), and a check that cannot be
run within its bound gives the call the status `unchecked`, holding up nothing else.

Each hostile case took minutes (or hours) with Python's backtracking `re` or jsonschema's
own keywords; the module's timeout is what fails them there, not a speed assertion. A real
grammar or pattern keeps its verdict.

Not responsible for how the regex dialects are translated (test_linear_regex.py) or for
the bounds on what decoding assembles (test_decode_bounds.py).
"""

from __future__ import annotations

import gc
import http.server
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from llmtap.protocols.canonical import Exchange, RequestFacts, ToolCall, ToolSpec
from llmtap.protocols.toolcheck import check_tool_calls
from llmtap.protocols.vocabulary import TOOL_STATUSES

pytestmark = pytest.mark.timeout(60)

HOSTILE = "a" * 30 + "!"  # 2^30 ways for `(a+)+` to fail on it


def checked(tools: list[ToolSpec], *calls: ToolCall) -> list[tuple[str, str | None]]:
    ex = Exchange(protocol="openai.responses", request=RequestFacts(tools=tools))
    ex.finish_reason = "tool_use"
    ex.tool_calls = list(calls)
    check_tool_calls(ex)
    return [(call.status, call.status_detail) for call in ex.tool_calls]


def status_of(tool: ToolSpec, call: ToolCall) -> str:
    [(status, _)] = checked([tool], call)
    return status


def function(arguments: dict[str, Any]) -> ToolCall:
    return ToolCall(id="c", name="f", arguments=arguments, arguments_raw=json.dumps(arguments), valid_json=True)


def custom(text: str) -> ToolCall:
    return ToolCall(id="c", name="f", arguments=None, arguments_raw=text, valid_json=False, kind="custom")


def schema_tool(schema: dict[str, Any]) -> ToolSpec:
    return ToolSpec("f", {"type": "object", **schema})


def grammar_tool(syntax: str, definition: str) -> ToolSpec:
    return ToolSpec("f", {"type": "grammar", "syntax": syntax, "definition": definition}, "custom")


def test_unchecked_is_a_status() -> None:
    assert "unchecked" in TOOL_STATUSES


# -- regular expressions that backtrack: RE2 decides them ----------------------------------------


@pytest.mark.parametrize(
    ("tool", "call", "status"),
    [
        (grammar_tool("regex", "(a|a)*b"), custom(HOSTILE), "schema_violation"),
        (grammar_tool("regex", "(a|a)*b"), custom("aaab"), "valid"),
        (grammar_tool("regex", "(a+)+b"), custom(HOSTILE), "schema_violation"),
        (grammar_tool("regex", r"(\w+\s?)*!"), custom("word " * 6 + "!"), "valid"),
        (schema_tool({"properties": {"s": {"pattern": "^(a+)+$"}}}), function({"s": HOSTILE}), "schema_violation"),
        (schema_tool({"properties": {"s": {"pattern": "^(a+)+$"}}}), function({"s": "aaaa"}), "valid"),
        (schema_tool({"properties": {"s": {"pattern": "(x+x+)+y"}}}), function({"s": "x" * 40}), "schema_violation"),
        (
            schema_tool({"patternProperties": {"^(a+)+$": {"type": "integer"}}}),
            function({HOSTILE: "x", "aaaa": 1}),
            "valid",
        ),
        (
            schema_tool({"patternProperties": {"^(a+)+$": {"type": "integer"}}}),
            function({"aaaa": "x"}),
            "schema_violation",
        ),
        (
            schema_tool({"patternProperties": {"^(a+)+$": {}}, "additionalProperties": False}),
            function({HOSTILE: 1}),
            "schema_violation",
        ),
        (
            schema_tool({"patternProperties": {"^(a+)+$": {}}, "additionalProperties": False}),
            function({"aaa": 1}),
            "valid",
        ),
        # a subschema naming another dialect must not bring the backtracking keywords back
        (
            schema_tool(
                {"properties": {"s": {"$schema": "http://json-schema.org/draft-07/schema#", "pattern": "^(a+)+$"}}}
            ),
            function({"s": HOSTILE}),
            "schema_violation",
        ),
        (
            schema_tool(
                {"$schema": "http://json-schema.org/draft-04/schema#", "properties": {"s": {"pattern": "^(a+)+$"}}}
            ),
            function({"s": HOSTILE}),
            "schema_violation",
        ),
        (grammar_tool("lark", "start: A\nA: /(a|a)*b/"), custom(HOSTILE), "schema_violation"),
        (grammar_tool("lark", "start: A\nA: /(a|a)*b/"), custom("aab"), "valid"),
        (grammar_tool("lark", 'start: "x" A\nA: /(a+)+b/'), custom("x" + HOSTILE), "schema_violation"),
    ],
)
def test_backtracking_shapes_get_their_verdict(tool: ToolSpec, call: ToolCall, status: str) -> None:
    assert status_of(tool, call) == status


# -- what RE2 cannot run is unchecked, never run by a backtracking engine ---------------------------


@pytest.mark.parametrize(
    ("tool", "call"),
    [
        (schema_tool({"properties": {"s": {"pattern": "^(?=a)(a+)+$"}}}), function({"s": HOSTILE})),
        (schema_tool({"properties": {"s": {"pattern": r"^(a+)\1$"}}}), function({"s": HOSTILE})),
        (schema_tool({"patternProperties": {"^(?!b)(a+)+$": {"type": "integer"}}}), function({HOSTILE: "x"})),
        (grammar_tool("regex", "(?=a)(a|a)*b"), custom(HOSTILE)),
        (grammar_tool("lark", "start: A\nA: /(?=a)(a|a)*b/"), custom(HOSTILE)),
        # jsonschema's `unevaluatedProperties` runs `patternProperties` with Python's `re`
        (
            schema_tool({"patternProperties": {"^(a+)+$": {}}, "unevaluatedProperties": False}),
            function({HOSTILE: 1}),
        ),
    ],
)
def test_what_re2_cannot_run_is_unchecked(tool: ToolSpec, call: ToolCall) -> None:
    [(status, detail)] = checked([tool], call)
    assert status == "unchecked", detail
    assert detail and "\n" not in detail and HOSTILE not in detail


def test_a_pattern_that_is_never_reached_does_not_make_the_call_unchecked() -> None:
    tool = schema_tool({"properties": {"s": {"pattern": "^(?=a)a$"}, "n": {"type": "integer"}}})
    assert status_of(tool, function({"n": 1})) == "valid"
    assert status_of(tool, function({"n": "x"})) == "schema_violation"


# -- checks whose cost is not in a regex ------------------------------------------------------------


def test_an_ambiguous_grammar_that_earley_cannot_finish_is_unchecked() -> None:
    """Earley is cubic on `e: e e | "a"`: 200 characters took half a minute."""
    tool = grammar_tool("lark", 'start: e\ne: e e | "a"')
    assert status_of(tool, custom("ab")) == "schema_violation"  # short: decided
    assert status_of(tool, custom("a" * 200 + "b")) == "unchecked"


@pytest.mark.parametrize("filler", ["\n", " \n", "\r\n", "// x\n"])
def test_a_grammar_of_blank_lines_loads_in_linear_time(filler: str) -> None:
    """lark's own grammar reader and our import check backtracked over runs of blank
    lines: 32,000 newlines took 17 s to load."""
    body = filler * (15_000 // len(filler))  # the definition stays under MAX_DEFINITION
    tool = grammar_tool("lark", body + 'start: "a"\n' + body)
    assert status_of(tool, custom("a")) == "valid"
    assert status_of(tool, custom("b")) == "schema_violation"


def test_references_that_fan_out_exponentially_are_unchecked() -> None:
    """Each level refers to the one below twice: 2^40 validations of a string."""
    defs: dict[str, Any] = {"l0": {"type": "string"}}
    for level in range(1, 41):
        defs[f"l{level}"] = {"allOf": [{"$ref": f"#/$defs/l{level - 1}"}, {"$ref": f"#/$defs/l{level - 1}"}]}
    tool = schema_tool({"$defs": defs, "properties": {"s": {"$ref": "#/$defs/l40"}}})
    [(status, detail)] = checked([tool], function({"s": "x"}))
    assert status == "unchecked", detail


def test_unique_items_of_many_objects_is_checked_in_linear_time() -> None:
    """jsonschema compares unhashable items pairwise: 20,000 objects were 2 × 10^8 comparisons."""
    tool = schema_tool({"properties": {"xs": {"type": "array", "uniqueItems": True}}})
    items = [{"i": i} for i in range(20_000)]
    assert status_of(tool, function({"xs": items})) == "valid"
    assert status_of(tool, function({"xs": [*items, {"i": 7}]})) == "schema_violation"
    assert status_of(tool, function({"xs": [1, True, 1.0]})) == "schema_violation"  # 1 == 1.0
    assert status_of(tool, function({"xs": [1, True, [1], [True], {"a": 0}, {"a": False}]})) == "valid"


def test_the_garbage_collectors_passes_are_not_charged_to_a_check() -> None:
    """A full collection walks the whole heap, whatever the exchange: a busy process (CI's
    test worker) once made the check above `unchecked`. Each pass here takes 50 ms more of
    this thread's CPU; the checks' clock (0.1 s and 2 s per MiB) must not count them."""
    burned = 0.0

    def slow_pass(phase: str, _info: dict[str, int]) -> None:
        nonlocal burned
        if phase == "start" and burned < 3.0:
            until = time.thread_time() + 0.05
            while time.thread_time() < until:
                pass
            burned += 0.05

    tool = schema_tool({"properties": {"xs": {"type": "array", "uniqueItems": True}}})
    call = function({"xs": [*({"i": i} for i in range(20_000)), {"i": 7}]})
    gc.callbacks.append(slow_pass)
    try:
        status = status_of(tool, call)
    finally:
        gc.callbacks.remove(slow_pass)
    assert burned > 1.0  # more than the clock allows this exchange: the passes did run
    assert status == "schema_violation", (status, burned)


class _Counting(http.server.BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        _Counting.hits.append(self.path)
        body = b'{"type": "string"}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def schema_server() -> Iterator[str]:
    server = http.server.HTTPServer(("127.0.0.1", 0), _Counting)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/schema.json"
    finally:
        server.shutdown()
        server.server_close()


def test_a_remote_reference_is_never_fetched(schema_server: str) -> None:
    """jsonschema's default registry fetches an unknown `$ref` with urlopen, without a
    timeout: a request could make the writer wait on any host, for ever."""
    _Counting.hits.clear()
    tool = schema_tool({"properties": {"s": {"$ref": schema_server}}})
    [(status, detail)] = checked([tool], function({"s": "x"}))
    assert _Counting.hits == []
    assert status == "unchecked", detail


def test_many_hostile_calls_in_one_exchange_share_one_bound() -> None:
    """The bound is the exchange's: 200 calls that each cost the most one call may cost
    do not take 200 times as long, and each one past the bound is unchecked."""
    tool = grammar_tool("lark", 'start: e\ne: e e | "a"')
    statuses = [status for status, _ in checked([tool], *[custom("a" * 200 + "b")] * 200)]
    assert set(statuses) == {"unchecked"}


def test_real_schemas_and_grammars_keep_their_verdicts() -> None:
    tool = schema_tool(
        {
            "properties": {
                "date": {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"},
                "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
            },
            "patternProperties": {"^x-": {"type": "string"}},
            "additionalProperties": False,
            "required": ["date"],
        }
    )
    assert status_of(tool, function({"date": "2026-12-01", "tags": ["a", "b"], "x-note": "n"})) == "valid"
    assert status_of(tool, function({"date": "2026-12-1"})) == "schema_violation"
    assert status_of(tool, function({"date": "2026-12-01", "other": 1})) == "schema_violation"
    assert status_of(tool, function({"date": "2026-12-01", "tags": ["a", "a"]})) == "schema_violation"
    assert status_of(tool, function({"date": "2026-12-01", "x-note": 3})) == "schema_violation"
    phone = grammar_tool("regex", r"\d{3}-\d{4}")
    assert status_of(phone, custom("555-1234")) == "valid"
    assert status_of(phone, custom("555-12345")) == "schema_violation"


def test_the_first_schema_a_process_checks_does_not_pay_for_importing_jsonschema() -> None:
    """CI found two corpus calls `unchecked` on a loaded machine: the writer's first schema
    spent its exchange's clock importing jsonschema and loading its metaschemas."""
    program = (
        "import json, sys\n"
        "from llmtap.protocols.budget import CheckClock\n"
        "from llmtap.protocols.canonical import Exchange, RequestFacts, ToolCall, ToolSpec\n"
        "from llmtap.protocols.toolcheck import check_tool_calls\n"
        "tool = ToolSpec(name='f', schema={'type': 'object', 'properties': {'q': {'type': 'string'}}})\n"
        "call = ToolCall(id='c', name='f', arguments={'q': 'x'}, arguments_raw='{\"q\": \"x\"}', valid_json=True)\n"
        "ex = Exchange(protocol='openai.chat', request=RequestFacts(tools=[tool]))\n"
        "ex.tool_calls = [call]\n"
        "check_tool_calls(ex, CheckClock(0.02))\n"
        "print(call.status, call.status_detail)\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert done.stdout.split()[0] == "valid", done.stdout + done.stderr
