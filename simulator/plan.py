"""What the simulated provider answers, decided from the last user message: `[tool:NAME]`
asks for a tool call, `[malformed]` for a call with broken JSON arguments, `[error:429]`
and `[error:529]` for an error, `[midstream-error]` for a stream that fails halfway,
`[blocked]` for a content-filtered prompt; a tool result gets a final answer, anything
else a short text.

Not responsible for any protocol's wire format (see the `wire_*` modules) or for counting
tokens (see `wire_common`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

_MARKER = re.compile(r"\[(tool:[\w-]+|malformed|error:\d+|midstream-error|blocked)\]")
# Claude Code puts context of its own (git attribution, reminders) in the user's message as
# <system-reminder> blocks; the answer is about what the user typed, not about those.
_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)


@dataclass
class Plan:
    """What to answer: text, or tool calls, or an error."""

    text: str = ""
    calls: list[tuple[str, str]] = field(default_factory=list)  # (name, raw JSON arguments)
    error: int | None = None
    midstream_error: bool = False
    blocked: bool = False


def plan_for(last_user_text: str, has_tool_result: bool) -> Plan:
    last_user_text = _REMINDER.sub(" ", last_user_text or "")
    marker = _MARKER.search(last_user_text or "")
    if has_tool_result:
        return Plan(
            text="Done. The tool said what we needed; here is the summary you asked for, in two lines.\n"
            "Everything checks out and nothing else needs to change."
        )
    if marker is None:
        found = re.findall(r"[A-Za-z]+", last_user_text or "")[:12]
        topic = " ".join(found) or "that"
        return Plan(text=f"Here is a short answer about {topic}. " * 3 + "Anything else?")
    kind = marker.group(1)
    if kind.startswith("tool:"):
        name = kind.split(":", 1)[1]
        return Plan(calls=[(name, json.dumps({"path": "src/app.py", "query": "status", "limit": 5}))])
    if kind == "malformed":
        return Plan(calls=[("run_tests", '{"target": "tests/unit", "verbose": tru')])
    if kind.startswith("error:"):
        return Plan(error=int(kind.split(":", 1)[1]))
    if kind == "midstream-error":
        return Plan(text="Starting on it. First I will look at the failing test, then", midstream_error=True)
    return Plan(blocked=True)
