"""Gemini CLI's chat logs (`~/.gemini/tmp/<project>/chats/session-*.jsonl`, and the older
whole-file `session-*.json`): the model calls they record, one per message of type
`gemini` with `tokens`.

The JSON Lines file starts with the session (`sessionId`, `projectHash`, `startTime`), then
has a line per message as it is written and again as it is updated (its tool calls added),
and `{"$set": {...}}` lines that replace fields of the session, `messages` among them. So
a message is one call however many lines repeat it, by its id within the session. Its
`tokens` are the response's `usageMetadata` under shorter names (`input`: prompt tokens,
cached ones in them; `output`: candidates; `cached`, `thoughts`, `tool`, `total`), given
back their API names for the Gemini translator. The log keeps no response id, and the
model is the one asked for. The CLI's own classifier calls are not in it.

Not responsible for what is new to the store (agent_logs.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from llmtap.storage.importers import agent_calls
from llmtap.storage.importers.agent_calls import LoggedCall, clean_id, count, json_lines, moment

AGENT = "gemini-cli"
MAX_WHOLE = 64 * 1024 * 1024  # bytes of a whole-file (.json) log read at most
_NAMES = {
    "input": "promptTokenCount",
    "output": "candidatesTokenCount",
    "cached": "cachedContentTokenCount",
    "thoughts": "thoughtsTokenCount",
    "tool": "toolUsePromptTokenCount",
    "total": "totalTokenCount",
}


def looks_like(first: dict[str, Any]) -> bool:
    """Whether a first line (or a whole file) is a Gemini CLI session."""
    return isinstance(first.get("sessionId"), str) and ("projectHash" in first or "messages" in first)


def read(handle: Any, name: str) -> Iterator[tuple[LoggedCall | None, str | None]]:
    """The file's calls, when the file is read or when more than `agent_calls.MAX_HELD` are
    held; unreadable lines as problems."""
    session = ""
    calls: dict[str, LoggedCall] = {}
    for line, problem in json_lines(handle, name):
        if problem:
            yield None, problem
            continue
        session = clean_id(line.get("sessionId")) or session
        update = line.get("$set")
        messages = update.get("messages") if isinstance(update, dict) else line.get("messages")
        for message in messages if isinstance(messages, list) else [line]:
            found = _call(session, message)
            if found is not None:
                calls[found.key] = found
        yield from ((call, None) for call in agent_calls.spill(calls))
    yield from ((call, None) for call in calls.values())


def read_whole(handle: Any, name: str) -> Iterator[tuple[LoggedCall | None, str | None]]:
    """An older whole-file session (`{"sessionId", "messages": [...]}`)."""
    data = handle.read(MAX_WHOLE + 1)
    if len(data) > MAX_WHOLE:
        yield None, f"{name}: over {MAX_WHOLE // (1024 * 1024)} MiB, skipped"
        return
    try:
        whole = json.loads(data)
    except (ValueError, RecursionError):
        yield None, f"{name}: not JSON"
        return
    messages = whole.get("messages") if isinstance(whole, dict) else None
    if not isinstance(messages, list):
        yield None, f"{name}: no messages"
        return
    session = clean_id(whole.get("sessionId")) or ""
    calls = {call.key: call for call in (_call(session, m) for m in messages) if call is not None}
    yield from ((call, None) for call in calls.values())


def _call(session: str, message: Any) -> LoggedCall | None:
    if not isinstance(message, dict) or message.get("type") != "gemini":
        return None
    message_id, model = clean_id(message.get("id")), clean_id(message.get("model"))
    tokens, at = message.get("tokens"), moment(message.get("timestamp"))
    if message_id is None or model is None or not isinstance(tokens, dict) or at is None:
        return None
    usage = {api: value for short, api in _NAMES.items() if (value := count(tokens.get(short))) is not None}
    if "promptTokenCount" not in usage:
        return None
    return LoggedCall(agent=AGENT, key=f"{session}:{message_id}", model=model, at=at, usage=usage)
