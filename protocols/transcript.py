"""A request body as a human reads it: the system prompt, then each message by role as
text, with tool calls, tool results and media shown as short bracketed notes.

Used by `llmtap show` and the dashboard's exchange view when bodies were kept. Pure:
a parsed JSON body in, plain values out. Not responsible for request facts (each
protocol module's `decode_request`) or for redaction (bodies are stored redacted).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

NOTE_LIMIT = 300  # characters of a tool call's arguments or result shown inline


@dataclass
class Transcript:
    system: str = ""
    messages: list[tuple[str, str]] = field(default_factory=list)  # (role, text)


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= NOTE_LIMIT else text[:NOTE_LIMIT] + "…"


def _part_text(part: Any) -> str:
    """One content part of any protocol as text."""
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        return ""
    kind = part.get("type")
    text = part.get("text")
    if isinstance(text, str) and kind in (None, "text", "input_text", "output_text"):
        return text
    if kind in ("tool_use", "function_call") or "functionCall" in part:
        call = part.get("functionCall", part)
        args = call.get("input", call.get("args", call.get("arguments")))
        return f"[tool call {call.get('name')} {_short(args)}]"
    if kind in ("tool_result", "function_call_output", "function_result") or "functionResponse" in part:
        result = part.get("functionResponse", part)
        content = result.get("content", result.get("output", result.get("response", result.get("result"))))
        if isinstance(content, list):
            content = " ".join(_part_text(c) for c in content)
        ident = result.get("tool_use_id") or result.get("call_id") or result.get("name")
        return f"[tool result {ident}: {_short(content)}]"
    if kind in ("image", "image_url", "input_image") or "inlineData" in part or "fileData" in part:
        return "[image]"
    if kind in ("thinking", "redacted_thinking", "reasoning"):
        return "[reasoning]"
    if kind in ("document", "input_file", "file"):
        return "[document]"
    return f"[{kind or 'part'}]"


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        return _part_text(content)
    if isinstance(content, list):
        return "\n".join(t for t in (_part_text(p) for p in content) if t)
    return ""


def transcript(protocol: str, body: dict[str, Any]) -> Transcript:
    out = Transcript()
    if protocol in ("anthropic.messages", "bedrock.converse"):  # Converse: the same system and messages
        out.system = _content_text(body.get("system"))
        out.messages = [(str(m.get("role")), _content_text(m.get("content"))) for m in _dicts(body.get("messages"))]
    elif protocol == "openai.chat":
        for message in _dicts(body.get("messages")):
            role, text = str(message.get("role")), _content_text(message.get("content"))
            calls = [
                f"[tool call {c.get('function', {}).get('name')} {_short(c.get('function', {}).get('arguments'))}]"
                for c in _dicts(message.get("tool_calls"))
            ]
            text = "\n".join(t for t in [text, *calls] if t)
            if role in ("system", "developer") and not out.messages:
                out.system = "\n".join(t for t in (out.system, text) if t)
            else:
                out.messages.append((role, text))
    elif protocol == "openai.responses":
        out.system = _content_text(body.get("instructions"))
        entries = body.get("input")
        for entry in [entries] if isinstance(entries, str) else _dicts(entries):
            if isinstance(entry, str):
                out.messages.append(("user", entry))
            elif "role" in entry:
                out.messages.append((str(entry["role"]), _content_text(entry.get("content"))))
            else:
                out.messages.append(("tool" if "output" in entry else "assistant", _part_text(entry)))
    elif protocol == "gemini.generate":
        system = body.get("systemInstruction") or body.get("system_instruction") or {}
        out.system = _content_text(system.get("parts") if isinstance(system, dict) else system)
        out.messages = [
            (str(c.get("role") or "user"), _content_text(c.get("parts"))) for c in _dicts(body.get("contents"))
        ]
    elif protocol == "gemini.interactions":
        out.system = _content_text(body.get("system_instruction"))
        inputs = body.get("input")
        for item in inputs if isinstance(inputs, list) else [inputs]:
            if isinstance(item, dict) and "role" in item:
                out.messages.append((str(item["role"]), _content_text(item.get("content"))))
            elif item is not None:
                out.messages.append(("user", _content_text(item)))
    return out


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []
