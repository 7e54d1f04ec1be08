"""Responses `custom` tools (free-form input, optionally a Lark or regex grammar): the
grammar check of protocols/grammar.py and the statuses protocols/toolcheck.py gives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from llmtap.protocols import grammar
from llmtap.protocols.budget import CheckClock
from llmtap.protocols.canonical import Exchange, RequestFacts, ToolCall, ToolSpec
from llmtap.protocols.exchange import decode_exchange
from llmtap.protocols.toolcheck import check_tool_calls

FIXTURES = Path(__file__).parents[1] / "fixtures" / "codex"
PATCH = (FIXTURES / "apply_patch.lark").read_text()


def lark(definition: str) -> dict[str, Any]:
    return {"type": "grammar", "syntax": "lark", "definition": definition}


def regex(definition: str) -> dict[str, Any]:
    return {"type": "grammar", "syntax": "regex", "definition": definition}


CSV = 'start: NUMBER ("," NUMBER)*\n%import common.NUMBER\n%import common.WS\n%ignore WS'


def verdict(declared: Any, text: str) -> tuple[str, str | None]:
    return grammar.verdict(declared, text, CheckClock.for_size(0))


def problem(declared: Any, text: str) -> str | None:
    """The one-line problem of a text that breaks the format; None when it fits."""
    status, detail = verdict(declared, text)
    assert status in ("valid", "schema_violation"), (status, detail)
    return detail if status == "schema_violation" else None


@pytest.mark.parametrize(
    ("declared", "text", "fits"),
    [
        (lark(CSV), "1, 2 ,3", True),
        (lark(CSV), "1, 2, x", False),
        (lark(CSV), "", False),
        # Codex's patch grammar: `/(.*)/` is zero-width to `lark`, rewritten as `/(.+)/?`
        (lark(PATCH), "*** Begin Patch\n*** Add File: a.txt\n+hi\n+\n*** End Patch\n", True),
        (
            lark(PATCH),
            "*** Begin Patch\n*** Update File: a.py\n@@ def f():\n-    x = 1\n+    x = 2\n*** End Patch",
            True,
        ),
        (lark(PATCH), "*** Begin Patch\n*** Delete File: gone.txt\n*** End Patch\n", True),
        (lark(PATCH), "*** Begin Patch\n*** Frobnicate: a.txt\n*** End Patch\n", False),
        (lark(PATCH), "*** Begin Patch\n*** Add File: a.txt\n+hi\n", False),  # no end
        (regex(r"\d{3}-\d{4}"), "555-1234", True),
        (regex(r"\d{3}-\d{4}"), "555-12345", False),  # a full match, not a search
        (regex(r"\d{3}-\d{4}"), "x555-1234", False),
    ],
)
def test_grammar_fits_or_breaks(declared: dict[str, Any], text: str, fits: bool) -> None:
    found = problem(declared, text)
    assert (found is None) is fits, found
    if found is not None:
        assert "\n" not in found and len(found) < 300


@pytest.mark.parametrize(
    "declared",
    [
        None,
        {"type": "text"},
        {"type": "grammar", "syntax": "lark"},  # no definition: nothing declared to hold it to
    ],
)
def test_formats_that_declare_nothing_pass_anything(declared: Any) -> None:
    assert verdict(declared, "b" * 40) == ("valid", None)


@pytest.mark.parametrize(
    "declared",
    [
        {"type": "grammar", "syntax": "ebnf", "definition": "x"},  # not a syntax we know
        regex(r"(?=b)b+"),  # lookahead: no linear-time engine runs it
        regex(r"(b)\1"),  # a backreference
        regex(r"[a-z&&[^aeiou]]+"),  # Rust's class intersection: RE2 would read it as literals
        lark("start: %llguidance {}"),  # LLGuidance's own dialect: does not load here
        lark('%import .secrets (X)\nstart: "a"'),  # an import names a file: never read
        lark("%import mygrammar.X\nstart: X"),
        lark("start: " + "a" * (grammar.MAX_DEFINITION + 1)),
        lark("start: X\nX: /(?<=a)b+/"),  # a terminal RE2 cannot run
    ],
)
def test_formats_that_cannot_be_applied_are_unchecked(declared: Any) -> None:
    status, detail = verdict(declared, "b" * 40)
    assert status == "unchecked", detail
    assert detail and "\n" not in detail


@pytest.mark.parametrize(
    ("declared", "text"),
    [
        (regex(r"(?P<word>\p{L}+)"), "wörter"),  # Rust regex syntax Python's `re` could not compile
        (regex(r"(a+)+b"), "a" * 30 + "b"),  # nested quantifiers: RE2 runs them in linear time
        (regex(r"(\w+\s?)*!"), "two words!"),
        (regex(r"\d+"), "٣٤"),  # Rust's \d is Unicode
        (lark("start: X\nX: /(a+)+c/"), "aaac"),
    ],
)
def test_rust_syntax_and_backtracking_shapes_are_applied(declared: Any, text: str) -> None:
    assert verdict(declared, text) == ("valid", None)
    assert verdict(declared, text + "%")[0] == "schema_violation"


def test_problem_names_where_not_what() -> None:
    """The detail is stored even in body mode `none`: it must not quote the input."""
    found = problem(lark(CSV), "1, 2, secret-thing")
    assert found is not None and "secret" not in found
    assert "line 1" in found and "column" in found


def test_parsers_are_cached_by_definition() -> None:
    definition = CSV + "\n// cache probe"
    verdict(lark(definition), "1")
    cached = dict(grammar._cache)
    verdict(lark(definition), "2")
    assert [key for key in grammar._cache if key not in cached] == []
    # a definition that failed to load is cached as unchecked, not rebuilt
    broken = "start: %llguidance {} // probe"
    verdict(lark(broken), "x")
    assert any(isinstance(value, grammar._Unloadable) for value in grammar._cache.values())


def test_earley_input_is_bounded() -> None:
    ambiguous = 'start: a | b\na: "x"+\nb: "x"+'  # a reduce/reduce conflict: Earley only
    assert problem(lark(ambiguous), "xx") is None
    assert problem(lark(ambiguous), "xy") is not None
    assert verdict(lark(ambiguous), "y" * (grammar.MAX_EARLEY_INPUT + 1))[0] == "unchecked"


def test_earley_gives_up_when_the_clock_is_spent() -> None:
    """An ambiguous grammar makes Earley cubic: 200 characters took half a minute."""
    ambiguous = lark('start: e\ne: e e | "a"')
    assert problem(ambiguous, "ab") is not None  # short: decided
    assert verdict(ambiguous, "a" * 200 + "b")[0] == "unchecked"


def _exchange(tools: list[ToolSpec], *calls: ToolCall, finish: str = "tool_use") -> Exchange:
    ex = Exchange(protocol="openai.responses", request=RequestFacts(tools=tools))
    ex.finish_reason = finish  # type: ignore[assignment]
    ex.tool_calls = list(calls)
    check_tool_calls(ex)
    return ex


def custom(name: str, text: str) -> ToolCall:
    return ToolCall(id="c", name=name, arguments=None, arguments_raw=text, valid_json=False, kind="custom")


def test_custom_call_statuses() -> None:
    tools = [
        ToolSpec("exec", lark(CSV), "custom"),
        ToolSpec("free", {"type": "text"}, "custom"),
        ToolSpec("bare", None, "custom"),
    ]
    ex = _exchange(
        tools,
        custom("exec", "1,2"),
        custom("exec", "one, two"),
        custom("free", "{ not json"),
        custom("bare", ""),
        custom("missing", "x"),
    )
    got = [(c.status, c.kind) for c in ex.tool_calls]
    assert got == [
        ("valid", "custom"),
        ("schema_violation", "custom"),
        ("valid", "custom"),  # text format: anything, and never invalid_json
        ("valid", "custom"),
        ("unknown_tool", "custom"),
    ]
    assert ex.tool_calls[1].status_detail and "lark grammar" in ex.tool_calls[1].status_detail


def test_truncated_custom_call() -> None:
    ex = _exchange([ToolSpec("exec", lark(CSV), "custom")], custom("exec", "1, "), finish="max_tokens")
    assert ex.tool_calls[0].status == "truncated"


def test_namespaced_tools_match_bare_and_flat_names() -> None:
    schema = {"type": "object", "properties": {"m": {"type": "string"}}, "required": ["m"]}
    tools = [ToolSpec("collaboration.send_message", schema)]

    def call(name: str, raw: str) -> ToolCall:
        return ToolCall(id="c", name=name, arguments=json.loads(raw), arguments_raw=raw, valid_json=True)

    ex = _exchange(
        tools,
        call("send_message", '{"m": "hi"}'),
        call("collaboration.send_message", '{"m": "hi"}'),
        call("collaboration__send_message", '{"m": "hi"}'),
        call("send_message", '{"m": 1}'),
        call("other.send_message", '{"m": "hi"}'),
    )
    assert [c.status for c in ex.tool_calls] == [
        "valid",
        "valid",
        "valid",
        "schema_violation",
        "unknown_tool",
    ]
    assert "collaboration.send_message" in (ex.tool_calls[-1].status_detail or "")


def test_decoded_custom_calls_from_a_stream() -> None:
    ex = decode_exchange(
        "openai.responses",
        request=(FIXTURES / "request_turn1.json").read_bytes(),
        response=(FIXTURES / "stream_tool_mix.sse").read_bytes(),
        path="/v1/responses",
        host="api.openai.com",
        status=200,
        content_type="text/event-stream",
    )
    assert ex.decode_error is None and ex.complete
    calls = [(c.id, c.name, c.kind, c.valid_json, c.arguments is None, c.status) for c in ex.tool_calls]
    assert calls == [
        ("call_patch_ok", "apply_patch", "custom", False, True, "valid"),
        ("call_patch_bad", "apply_patch", "custom", False, True, "schema_violation"),
        ("call_img_ok", "view_image", "custom", False, True, "valid"),
        ("call_img_bad", "view_image", "custom", False, True, "schema_violation"),
        ("call_note", "note", "custom", False, True, "valid"),
        ("call_ns", "send_message", "function", True, False, "valid"),
        ("call_plan", "update_plan", "function", True, False, "schema_violation"),
        ("call_nope", "nope", "custom", False, True, "unknown_tool"),
    ]
    assert ex.tool_calls[0].arguments_raw == "*** Begin Patch\n*** Add File: hello.txt\n+hi\n+\n*** End Patch\n"
    printed = ex.to_dict()["tool_calls"]
    assert [c["kind"] for c in printed][:2] == ["custom", "custom"]
    assert list(printed[0])[:6] == ["id", "name", "arguments", "arguments_raw", "valid_json", "kind"]


def test_chat_style_nested_grammar() -> None:
    nested = {"type": "grammar", "grammar": {"syntax": "regex", "definition": r"\d+"}}
    assert problem(nested, "123") is None
    assert problem(nested, "12a") is not None


# Chat Completions custom tools (https://platform.openai.com/docs/guides/function-calling,
# "Custom tools"): declared as {"type": "custom", "custom": {"name", "format"}}, called as
# {"type": "custom", "custom": {"name", "input"}}, the input streamed in pieces.
CHAT_REQUEST = {
    "model": "gpt-5",
    "messages": [{"role": "user", "content": "sum 1 and 2"}],
    "tools": [
        {
            "type": "custom",
            "custom": {
                "name": "csv",
                "format": {"type": "grammar", "grammar": {"syntax": "lark", "definition": CSV}},
            },
        }
    ],
}


def _chat(response: bytes, stream: bool) -> Exchange:
    return decode_exchange(
        "openai.chat",
        request=json.dumps({**CHAT_REQUEST, "stream": stream}).encode(),
        response=response,
        path="/v1/chat/completions",
        host="api.openai.com",
        status=200,
        content_type="text/event-stream" if stream else "application/json",
    )


@pytest.mark.parametrize("text, status", [("1,2", "valid"), ("one, two", "schema_violation")])
def test_chat_custom_call_json(text: str, status: str) -> None:
    call = {"id": "call_1", "type": "custom", "custom": {"name": "csv", "input": text}}
    body = {
        "id": "chatcmpl-1",
        "model": "gpt-5",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "tool_calls": [call]}, "finish_reason": "tool_calls"}
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
    }
    ex = _chat(json.dumps(body).encode(), stream=False)
    [decoded] = ex.tool_calls
    assert (decoded.kind, decoded.arguments, decoded.arguments_raw, decoded.status) == ("custom", None, text, status)
    assert ex.finish_reason == "tool_use"


def test_chat_custom_call_streamed_in_pieces() -> None:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        body = {"id": "c", "model": "gpt-5", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return f"data: {json.dumps(body)}\n\n"

    pieces = [
        chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "custom", "custom": {"name": "csv", "input": ""}}]}),
        chunk({"tool_calls": [{"index": 0, "custom": {"input": "1,"}}]}),
        chunk({"tool_calls": [{"index": 0, "custom": {"input": "2"}}]}),
        chunk({}, "tool_calls"),
        "data: [DONE]\n\n",
    ]
    ex = _chat("".join(pieces).encode(), stream=True)
    [decoded] = ex.tool_calls
    assert (decoded.id, decoded.name, decoded.kind, decoded.arguments_raw) == ("call_1", "csv", "custom", "1,2")
    assert decoded.status == "valid" and decoded.arguments is None


def test_the_first_lark_grammar_of_a_process_is_checked_within_the_smallest_clock() -> None:
    """Importing `lark` is work no exchange causes (a fifth of a CPU second here, more on a
    loaded machine): the first custom call a fresh writer checks (Codex's `exec`) is still
    checked, not `unchecked`. A process of its own, where `lark` is not yet loaded and its
    import is made to spend 0.3 s of CPU, three times the smallest exchange's clock."""
    import subprocess
    import sys

    request = json.loads((FIXTURES / "request_codex0171_turn1.json").read_text())
    declared = request["input"][0]["tools"][0]["tools"][0]["format"]
    script = (
        "import importlib.abc, json, sys, time\n"
        "class Slow(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'lark':\n"
        "            end = time.thread_time() + 0.3\n"
        "            while time.thread_time() < end: pass\n"
        "        return None\n"
        "sys.meta_path.insert(0, Slow())\n"
        "from llmtap.protocols import grammar\n"
        "from llmtap.protocols.budget import CheckClock\n"
        "assert 'lark' not in sys.modules\n"
        "declared = json.loads(sys.stdin.read())\n"
        "text = 'const r = await tools.exec_command({ cmd: \"ls\" });\\ntext(r.output);\\n'\n"
        "print(json.dumps(grammar.verdict(declared, text, CheckClock.for_size(0))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], input=json.dumps(declared), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == ["valid", None]
