"""The served exchange and conversation pages as `llmtap show` prints them: sections of
labelled values in `show`'s order (who, when, where, request, transcript, answer, tool
calls, usage, cost with its parts, cache, tool problems), times as wall time in the zone asked for,
money in the CLI's one format, counts with separators, tool calls with their status,
lists and maps as words — never a value's JSON.

`show` itself lives in cli/audit.py, which this layer may not import: the labels and
order are taken from it, the formats from `analytics.render` that both use. Not
responsible for finding the exchange (analytics/audit.py) nor for the HTML (the
templates `exchange.html` and `conversation.html`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from decimal import Decimal
from typing import Any

from llmtap.analytics.render import local, money, zone_label

NOT_CACHEABLE = "below_minimum"


@dataclass
class Pair:
    label: str
    text: str
    kind: str = ""  # "num", "money", "id", "bad", "pre" (text that keeps its lines)


@dataclass
class Section:
    title: str
    pairs: list[Pair] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)  # under the pairs (a cost's parts)

    def add(self, label: str, value: Any, kind: str = "") -> None:
        text = value if isinstance(value, str) else words(value)
        if text:
            self.pairs.append(Pair(label, text, kind))


def words(value: Any) -> str:
    """A stored value as a person reads it: `yes`/`no`, `1,234`, `user 3, assistant 2`,
    `read_file, run_tests`; nothing for None, empty lists and maps."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".")
    if isinstance(value, Decimal):
        return format(value.normalize(), "f")
    if isinstance(value, dict):
        return ", ".join(f"{k} {words(v)}".strip() for k, v in value.items() if v not in (None, "", [], {}))
    if isinstance(value, (list, tuple)):
        return ", ".join(words(v) for v in value if v not in (None, ""))
    return str(value)


def when(value: Any, zone: tzinfo = UTC, digits: int = 3) -> str:
    """A stored time as wall time in `zone` (to the millisecond by default)."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return value
    if not isinstance(value, datetime):
        return words(value)
    text = f"{local(value, zone):%Y-%m-%d %H:%M:%S.%f}"
    return text[: len(text) - 6 + digits] if digits else text[:-7]


def usd(value: Any) -> str:
    if value is None:
        return ""
    return money(Decimal(str(value)))


def _label(key: str) -> str:
    return key.removesuffix("_usd").removesuffix("_at").replace("_", " ")


def cache_words(cache: dict[str, Any]) -> str:
    """A cache verdict in words: `hit`, `miss: tools_changed`, `not cacheable (…)`."""
    if cache.get("verdict") in ("miss", "not_cacheable"):
        if cache.get("cause") == NOT_CACHEABLE:
            return "not cacheable (prefix under the model's minimum)"
        return f"miss: {cache.get('cause')}"
    return str(cache.get("verdict") or "")


def exchange(data: dict[str, Any], zone: tzinfo = UTC) -> list[Section]:
    sections = [_who(data["who"]), _when(data["when"], zone), _where(data["where"]), _request(data["request"])]
    sections.append(_answer(data["answer"]))
    sections.extend(_tool_call(call) for call in data["answer"].get("tool_calls") or [])
    usage = Section("Usage")
    for key, value in data["usage"].items():
        if key != "raw":
            usage.add(_label(key), value, "num" if isinstance(value, int) else "")
    sections.append(usage)
    sections.append(_cost(data["cost"]))
    sections.append(_cache(data["cache"]))
    sections.append(_problems(data.get("tool_problems") or []))
    return [s for s in sections if s.pairs or s.lines]


def _who(who: dict[str, Any]) -> Section:
    section = Section("Who")
    for key, value in who.items():
        section.add(_label(key), value, "id" if key in ("key_fingerprint", "session_id") else "")
    return section


def _when(times: dict[str, Any], zone: tzinfo) -> Section:
    section = Section("When")
    section.add("times in", zone_label(zone))
    spans = {"ttfb_ms": "to first byte", "ttft_ms": "to first token", "duration_ms": "duration"}
    for key, value in times.items():
        if key.endswith("_ms"):
            label = spans.get(key, key.removesuffix("_ms").replace("_", " "))
            section.add(label, f"{words(value)} ms" if value is not None else "", "num")
        else:
            section.add(_label(key), when(value, zone) if value is not None else "")
    return section


def _where(where: dict[str, Any]) -> Section:
    section = Section("Where")
    for key, value in where.items():
        section.add(_label(key), str(value) if key == "status" and value is not None else value)
    return section


def _request(request: dict[str, Any]) -> Section:
    section = Section("Request")
    section.add("model", request.get("model"), "id")
    section.add("stream", request.get("stream"))
    section.add("max tokens", request.get("max_tokens"), "num")
    section.add("messages by role", request.get("messages_by_role"))
    chars = request.get("system_chars")
    section.add("system prompt", f"{chars:,} characters" if isinstance(chars, int) and chars else "")
    section.add("tools declared", [t.get("name") for t in request.get("tools") or []])
    section.add("server tools", request.get("server_tools"))
    section.add("tool choice", request.get("tool_choice"))
    section.add("cache breakpoints", request.get("cache_breakpoints") or 0, "num")
    for key, label in (
        ("cache_ttl", "cache ttl"),
        ("prompt_cache_key", "prompt cache key"),
        ("previous_response_id", "previous response"),
        ("thinking", "thinking"),
        ("params", "parameters"),
        ("tool_result_ids", "tool results carried"),
    ):
        section.add(label, request.get(key))
    return section


def _answer(answer: dict[str, Any]) -> Section:
    section = Section("Answer")
    section.add("model", answer.get("model"), "id")
    finish, raw = answer.get("finish_reason"), answer.get("finish_reason_raw")
    section.add("finish", f"{finish} ({raw})" if raw and raw != finish else finish or raw)
    section.add("text", answer.get("text") or "", "pre")
    section.add("refusal", answer.get("refusal"), "pre")
    section.add("reasoning blocks", answer.get("reasoning_blocks"), "num")
    error = answer.get("error")
    section.add("error", error, "bad")
    section.add("server tool calls", [c.get("name") or c.get("kind") for c in answer.get("server_tool_calls") or []])
    section.add("interrupted", answer.get("interrupted"))
    section.add("decode error", answer.get("decode_error"), "bad")
    return section


def _tool_call(call: dict[str, Any]) -> Section:
    section = Section(f"Tool call {call.get('name') or '?'}")
    section.add("id", call.get("id"), "id")
    status = str(call.get("status") or "")
    section.add("status", status, "" if status in ("valid", "") else "bad")
    section.add("why", call.get("status_detail"))
    section.add("arguments", call.get("arguments_raw"), "pre")
    return section


def _cost(cost: dict[str, Any]) -> Section:
    """The price, its parts and the fee, what was served, and the pricer's part lines."""
    section = Section("Cost")
    for key, value in cost.items():
        if key == "detail":
            continue
        if key.endswith("_usd"):
            section.add(_label(key), usd(value), "money")
        else:
            section.add(_label(key).replace("price version", "price table"), value)
    if cost.get("total_usd") is None and cost.get("status"):
        section.pairs.insert(0, Pair("total", "unpriced" if cost["status"] != "usage_missing" else "no usage"))
    detail = cost.get("detail")
    if isinstance(detail, dict):
        section.lines = [_part(part) for part in detail.get("parts") or [] if isinstance(part, dict)]
        if detail.get("multiplier") not in (None, 1):
            section.lines.append(f"× {detail['multiplier']}")
        if detail.get("context"):
            section.lines.append("priced for " + words(detail["context"]))
    return section


def _part(part: dict[str, Any]) -> str:
    """One part of `cost_detail`: tokens (of the model, or an advisor's) or a per-use fee."""
    what = str(part.get("what") or "part")
    if what == "fee":
        rate = f" at ${part['usd_per_1k']} per 1,000" if part.get("usd_per_1k") is not None else ""
        return f"fee {part.get('kind')}: {words(part.get('count'))} uses{rate} = {usd(part.get('total'))}"
    pieces = [
        f"{key.replace('_', ' ')} {usd(part[key])}"
        for key in ("input", "cache_read", "cache_write", "output")
        if key in part
    ]
    model = f" {part['model']}" if part.get("model") else ""
    return f"{what}{model}: {', '.join(pieces)} = {usd(part.get('total'))}"


def _cache(cache: dict[str, Any]) -> Section:
    section = Section("Cache")
    section.add("verdict", cache_words(cache))
    for key, value in cache.items():
        if key in ("verdict", "cause"):
            continue
        if key.endswith("_usd"):
            section.add(_label(key), usd(value), "money")
        else:
            section.add(_label(key), value, "num" if isinstance(value, int) else "id" if key.endswith("_id") else "")
    return section


def _problems(problems: list[dict[str, Any]]) -> Section:
    """The conversation's tool problems stored on the exchange, a line each."""
    section = Section("Tool problems")
    for problem in problems:
        tool = f" {problem['tool']}" if problem.get("tool") else ""
        following = f" (next request {problem['next_id']})" if problem.get("next_id") else ""
        section.lines.append(f"{problem.get('status')}{tool}: call {problem.get('call_id')}{following}")
    return section


def conversation_turns(turns: list[dict[str, Any]], zone: tzinfo = UTC) -> list[dict[str, str]]:
    """The conversation page's rows, each cell as text: time in `zone`, counts with
    separators, money (`unpriced` where there is no price), the cache verdict in words."""
    rows = []
    for number, turn in enumerate(turns, start=1):
        rows.append(
            {
                "n": str(number),
                "when": when(turn["started_at"], zone, digits=0),
                "messages": words(turn.get("messages")),
                "finish": turn.get("finish_reason") or "",
                "in": words(turn.get("input_tokens")),
                "cached": words(turn.get("cache_read_tokens")),
                "out": words(turn.get("output_tokens")),
                "cost": usd(turn["cost_usd"]) if turn.get("cost_usd") is not None else "unpriced",
                "cache": cache_words(turn.get("cache") or {}),
                "tool_calls": ", ".join(str(n) for n in turn.get("tool_calls") or []),
                "problems": ", ".join(str(p) for p in turn.get("tool_problems") or []),
                "id": str(turn["id"]),
            }
        )
    return rows
