"""Claude Code's project session files (`~/.claude/projects/<project>/<session>.jsonl`):
the model calls they record, one per Anthropic message id.

Claude Code writes a line per content block of each assistant message, every line with the
message's id and its usage so far, and a resumed or forked session copies the earlier
lines into its new file. So a message is one call whatever lines repeat it: its usage is
that of its fullest line (the most output tokens; the last of equal ones), which is the
final usage when the stream ended. Lines that are not assistant messages, and the
assistant lines Claude Code makes itself (`isApiErrorMessage`, model `<synthetic>`), are
no calls.

The logs record the model id as sent: Bedrock's (`us.anthropic.…`) goes to Bedrock; a
Vertex AI session's model id is Anthropic's own, so it is taken as Anthropic's API (the
same price per token for these models). Not responsible for what is new to the store
(agent_logs.py) nor for the usage rules (the Anthropic translator applies them).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from llmtap.storage.importers import agent_calls
from llmtap.storage.importers.agent_calls import LoggedCall, clean_id, clean_usage, count, json_lines, moment

AGENT = "claude-code"


def looks_like(first: dict[str, Any]) -> bool:
    """Whether a first line is Claude Code's (a session line: its `sessionId` and `type`)."""
    return isinstance(first.get("sessionId"), str) and isinstance(first.get("type"), str) and "payload" not in first


def read(handle: Any, name: str) -> Iterator[tuple[LoggedCall | None, str | None]]:
    """The file's calls, one per message id, when the file is read (a message's lines may be
    apart), or when more than `agent_calls.MAX_HELD` are held; unreadable lines as problems
    on the way."""
    best: dict[str, tuple[int, LoggedCall]] = {}
    for line, problem in json_lines(handle, name):
        if problem:
            yield None, problem
            continue
        found = _call(line)
        if found is None:
            continue
        output = count(found.usage.get("output_tokens")) or 0
        held = best.get(found.key)
        if held is None or output >= held[0]:
            best[found.key] = (output, found)
        for _, call in agent_calls.spill(best):
            yield call, None
    for _, call in best.values():
        yield call, None


def _call(line: dict[str, Any]) -> LoggedCall | None:
    if line.get("type") != "assistant" or line.get("isApiErrorMessage"):
        return None
    message = line.get("message")
    if not isinstance(message, dict):
        return None
    message_id, model = clean_id(message.get("id")), clean_id(message.get("model"))
    usage, at = message.get("usage"), moment(line.get("timestamp"))
    if message_id is None or model is None or model == "<synthetic>" or not isinstance(usage, dict) or at is None:
        return None
    stop = message.get("stop_reason")
    return LoggedCall(
        agent=AGENT,
        key=message_id,
        model=model,
        at=at,
        usage=clean_usage(usage),
        response_id=message_id,
        finish=stop if isinstance(stop, str) and len(stop) <= 64 else None,
    )
