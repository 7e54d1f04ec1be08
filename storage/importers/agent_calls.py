"""One model call an agent's own session log recorded, and the HTTP exchange it stands for.

The coding agents keep local session logs with each response's usage (Claude Code's
`~/.claude/projects/*/*.jsonl`, Codex's `$CODEX_HOME/sessions/**/rollout-*.jsonl`, Gemini
CLI's `~/.gemini/tmp/*/chats/session-*`). A `LoggedCall` is one response such a log tells
of: which agent, the log's own key for it (what makes a streamed message's partial lines
and a resumed session's copies one call), the provider's response id where the log keeps
it, the model, when, and the usage exactly as the provider reported it.

`as_http` turns it into the provider's own non-streamed response body, sent to the
provider's API host, so that the same translator, usage rules (SPEC §2) and pricer as live
traffic decide its canonical tokens and cost; nothing is counted here.

Not responsible for reading the logs (claude_code.py, codex_sessions.py, gemini_chats.py),
for which calls are new (agent_logs.py), nor for storing them.
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from llmtap.storage.ingest import HttpExchange

MAX_ID = 200  # characters of an id or a model name a log may give
MAX_COUNT = 2**53  # a token count past this is no count
MAX_HELD = 100_000  # calls a reader holds from one file before it hands the oldest on (`spill`)
AGENTS = ("claude-code", "codex", "gemini-cli")
_ID = re.compile(r"^[A-Za-z0-9._:/@+=~-]+$")  # what providers' and the CLIs' ids and model names use
# Bedrock names Anthropic's models `anthropic.claude-…`, with a cross-region prefix (`us.`)
# or as an inference profile's ARN; Claude Code logs the id it sent.
_BEDROCK_MODEL = re.compile(r"^(?:arn:aws[\w-]*:bedrock:[\w-]+:\d*:[\w/-]*?/)?(?:[a-z]{2,4}\.)?anthropic\.")


@dataclass(frozen=True, slots=True)
class LoggedCall:
    agent: str  # one of AGENTS
    key: str  # the log's own id of the call: one call however many lines repeat it
    model: str
    at: datetime  # when the log wrote it (aware, UTC)
    usage: dict[str, Any]  # as the provider's API reports it (each reader's own shape)
    response_id: str | None = None  # the provider's message or response id, where logged
    finish: str | None = None  # the provider's own stop or finish reason, where logged
    route: str = "direct"  # "direct", "bedrock" or an unknown provider's name (never billed)
    extra: dict[str, Any] = field(default_factory=dict)


def clean_id(value: Any) -> str | None:
    """A log's id or model name, when it is one: letters, digits and `._:/@+=~-`, at most
    MAX_ID long (no markup, quotes, spaces or control characters)."""
    if isinstance(value, str) and 0 < len(value) <= MAX_ID and _ID.match(value):
        return value
    return None


def count(value: Any) -> int | None:
    """A token count, when it is one (a bool, a float or a negative number is not)."""
    if type(value) is int and 0 <= value < MAX_COUNT:
        return value
    return None


def clean_usage(value: Any, depth: int = 0) -> dict[str, Any]:
    """A logged usage object with only what a provider's usage holds: counts (never a
    negative, fractional or boolean one), short strings and lists of them, and objects of
    those a few levels deep; anything else is left out, as if the log had not said it."""
    out: dict[str, Any] = {}
    if not isinstance(value, dict) or depth > 3:
        return out
    for name, item in list(value.items())[:64]:
        if not isinstance(name, str) or len(name) > 64:
            continue
        if isinstance(item, dict):
            out[name] = clean_usage(item, depth + 1)
        elif isinstance(item, str) and len(item) <= 64:
            out[name] = item
        elif item is None:
            out[name] = None
        elif (kept := count(item)) is not None:
            out[name] = kept
    return out


def moment(value: Any) -> datetime | None:
    """An ISO 8601 timestamp with its zone (Z or an offset), in UTC; None otherwise."""
    if not isinstance(value, str) or len(value) > 40:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed.astimezone(UTC) if parsed.tzinfo is not None else None


def as_http(call: LoggedCall) -> HttpExchange:
    """The provider's non-streamed answer of `call`, as an exchange with its API host."""
    if call.agent == "claude-code":
        host, path, body = _anthropic(call)
    elif call.agent == "codex":
        host, path, body = _responses(call)
    else:
        host, path, body = _gemini(call)
    return HttpExchange(
        method="POST",
        host=host,
        path=path,
        request_headers=[],
        request_body=None,
        status=200,
        response_headers=[("content-type", "application/json")],
        response_body=json.dumps(body, sort_keys=True, separators=(",", ":")).encode(),
        response_encoded=False,
        started_at=call.at,
        ended_at=call.at,
    )


def _anthropic(call: LoggedCall) -> tuple[str, str, dict[str, Any]]:
    body: dict[str, Any] = {
        "id": call.response_id,
        "type": "message",
        "role": "assistant",
        "model": call.model,
        "content": [],
        "stop_reason": call.finish,
        "usage": call.usage,
    }
    if call.route == "bedrock" or _BEDROCK_MODEL.match(call.model):
        return "bedrock-runtime.us-east-1.amazonaws.com", f"/model/{quote(call.model, safe='')}/invoke", body
    return "api.anthropic.com", "/v1/messages", body


def _responses(call: LoggedCall) -> tuple[str, str, dict[str, Any]]:
    body: dict[str, Any] = {
        "id": call.response_id,
        "object": "response",
        "model": call.model,
        "status": "completed",
        "output": [],
        "usage": call.usage,
    }
    host = "api.openai.com" if call.route == "direct" else f"{_label(call.route)}.provider.invalid"
    return host, "/v1/responses", body


def _gemini(call: LoggedCall) -> tuple[str, str, dict[str, Any]]:
    body = {
        "candidates": [{"content": {"role": "model", "parts": []}, "finishReason": call.finish or "STOP"}],
        "modelVersion": call.model,
        "usageMetadata": call.usage,
    }
    path = f"/v1beta/models/{quote(call.model, safe='')}:generateContent"
    return "generativelanguage.googleapis.com", path, body


def _label(name: str) -> str:
    """A provider's name as one DNS label (an unknown provider's host never bills)."""
    cleaned = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")[:40]
    return cleaned or "unknown"


MAX_LINE = 32 * 1024 * 1024  # bytes of one log line read at most (a tool result may be large)


def spill(held: dict[str, Any]) -> list[Any]:
    """When `held` (a reader's calls of one file, oldest first) has more than MAX_HELD, its
    oldest half taken out to hand on, so that a file of millions of calls is read in bounded
    memory; else nothing. A line of a call handed on that comes later still is dropped as a
    repeat (agent_logs.Seen): the lines of one call are written together, so only a file
    that keeps more than MAX_HELD calls open at once loses any of their later counts."""
    if len(held) <= MAX_HELD:
        return []
    oldest = list(itertools.islice(held, len(held) - MAX_HELD // 2))
    return [held.pop(key) for key in oldest]


def json_lines(handle: Any, name: str) -> Any:
    """Each line of a JSON Lines file as (object, None), or (None, problem) for a line that is
    too long (skipped to its end, never held whole), not JSON, or not an object."""
    number = 0
    while True:
        line = handle.readline(MAX_LINE + 1)
        if not line:
            return
        number += 1
        if len(line) > MAX_LINE and not line.endswith(b"\n"):
            while (rest := handle.readline(MAX_LINE)) and not rest.endswith(b"\n"):
                pass
            yield None, f"{name} line {number}: over {MAX_LINE // (1024 * 1024)} MiB, skipped"
            continue
        if not line.strip():
            continue
        try:
            parsed = json.loads(line)
        except (ValueError, RecursionError):
            yield None, f"{name} line {number}: not JSON"
            continue
        if not isinstance(parsed, dict):
            yield None, f"{name} line {number}: not a JSON object"
            continue
        yield parsed, None
