"""One client can not break or forge the audit trail through what it sends or what its
upstream answers (SPEC §6): a team header of Rich markup and a reply whose model name,
answer and tool name carry markup and terminal escapes, recorded by the real proxy, then
printed by the real `llmtap log`, `show` and `report` as text."""

from __future__ import annotations

import json

from tests.e2e import harness
from tests.e2e.harness import Proxy, Reply
from tests.helpers import CliResult, llmtap

TEAM = "[/bold] [link=http://example.invalid]billing[/link]"
MODEL = "claude-[/bold][blink]x[/blink]\x1b]8;;http://example.invalid\x07\x1b[2J"
TEXT = "fine [/red]\x1b[31mred\x07\rforged line\nsecond line"


def _llmtap(proxy: Proxy, *args: str) -> CliResult:
    result = llmtap(*args, "--db", f"sqlite:///{proxy.db}", env={"LLMTAP_HOME": str(proxy.home)}, process=True)
    assert result.code == 0, (args, result.code, result.err)
    for char in ("\x1b", "\x07", "\r"):
        assert char not in result.out, f"{char!r} reached the terminal from llmtap {' '.join(args)}"
    return result


def test_hostile_team_model_and_answer_print_as_text(proxy: Proxy) -> None:
    reply = {
        "id": "msg_hostile_output",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [
            {"type": "text", "text": TEXT},
            {"type": "tool_use", "id": "toolu_hostile", "name": "=cmd|'/C calc'!A0", "input": {}},
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 11, "output_tokens": 5},
    }
    token = proxy.routes.add(Reply(chunks=[json.dumps(reply).encode()]))
    key = proxy.key(harness.ANTHROPIC_KEY)
    body = json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]})
    harness.curl(
        [
            f"{proxy.base('anthropic')}/v1/messages",
            "-H", "content-type: application/json",
            "-H", f"{harness.CASE_HEADER}: {token}",
            "-H", f"x-api-key: {key}",
            "-H", f"X-LLMTap-Team: {TEAM}",
            "--data-binary", body,
        ]
    )  # fmt: skip
    row = proxy.record(key)
    assert row["team"] == TEAM and row["model"] == MODEL  # stored as sent: the data itself

    listed = _llmtap(proxy, "log", "--team", TEAM)  # exit 70 with MarkupError before
    assert "[link=http://example.invalid]" in listed.out and "[blink]x[/blink]\\x1b]8;;" in listed.out
    shown = _llmtap(proxy, "show", row["id"]).out
    assert TEAM in shown and "[blink]x[/blink]\\x1b]8;;http://example.invalid\\x07\\x1b[2J" in shown
    assert "fine [/red]\\x1b[31mred\\x07\\x0dforged line" in shown  # the CR cannot rewrite the line
    assert "second line" in shown.split("forged line", 1)[1].splitlines()[1]  # a newline stays one
    assert "tool call =cmd|'/C calc'!A0" in shown
    _llmtap(proxy, "show", row["id"], "--conversation")
    assert "[link=http://example.invalid]" in _llmtap(proxy, "report", "usage", "--by", "team,model").out
