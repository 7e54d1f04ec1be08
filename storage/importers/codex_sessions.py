"""Codex CLI's session files (`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl`, CODEX_HOME
being `~/.codex` unless set): the model calls they record, one per Responses response.

Each line is `{"timestamp", "type", "payload"}`. Codex 0.171 writes a `token_usage_record`
per response, with the response id and that response's usage; earlier versions write only
`event_msg` lines of type `token_count`, whose `info.last_token_usage` is the last
response's usage and `info.total_token_usage` the session's running total, and which
they may write twice for one response (the same total again: a repeat, not a call). A
file with records is read by its records alone. The model is the latest `turn_context`'s;
the provider the `session_meta`'s `model_provider` (OpenAI's is billed as OpenAI; any
other is kept unpriced: its host and prices are not known here).

Codex's usage names (`input_tokens` with the cached ones in it, `cached_input_tokens`,
`output_tokens` with the reasoning ones in it, `reasoning_output_tokens`) are OpenAI's,
rewritten here as a Responses `usage` object for the translator. Not responsible for what
is new to the store (agent_logs.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from llmtap.storage.importers import agent_calls
from llmtap.storage.importers.agent_calls import LoggedCall, clean_id, count, json_lines, moment

AGENT = "codex"


def looks_like(first: dict[str, Any]) -> bool:
    """Whether a first line is a Codex rollout line (its `session_meta` comes first)."""
    return first.get("type") == "session_meta" and isinstance(first.get("payload"), dict)


def read(handle: Any, name: str) -> Iterator[tuple[LoggedCall | None, str | None]]:
    """The file's calls (see the module's doc), when the file is read or when more than
    `agent_calls.MAX_HELD` are held; unreadable lines as problems on the way. Once one
    kind of line (records or counts) has been handed on, the file is read by that kind."""
    session, provider, model = "", "openai", None
    records: list[LoggedCall] = []
    counted: list[LoggedCall] = []
    handed: str | None = None  # which kind was handed on before the end: "records", "counted"
    last_total: Any = None
    for line, problem in json_lines(handle, name):
        if problem:
            yield None, problem
            continue
        kind, payload, at = line.get("type"), line.get("payload"), moment(line.get("timestamp"))
        if not isinstance(payload, dict):
            continue
        if kind == "session_meta":
            session = clean_id(payload.get("id")) or session
            provider = clean_id(payload.get("model_provider")) or provider
        elif kind == "turn_context":
            model = clean_id(payload.get("model")) or model
        elif kind == "token_usage_record" and model and at:
            response_id = clean_id(payload.get("response_id"))
            usage = _usage(payload.get("usage"))
            if response_id and usage and handed != "counted":
                records.append(_call(response_id, model, at, usage, response_id, provider))
                counted.clear()  # a file with records is read by its records alone
                if len(records) > agent_calls.MAX_HELD:
                    handed = "records"
                    yield from ((call, None) for call in records)
                    records.clear()
        elif kind == "event_msg" and payload.get("type") == "token_count" and model and at:
            info = payload.get("info")
            if not isinstance(info, dict) or info.get("total_token_usage") == last_total:
                continue  # no usage yet, or the same response's count again
            last_total = info.get("total_token_usage")
            usage = _usage(info.get("last_token_usage"))
            total = _usage(last_total)
            if usage and total and (handed == "counted" or (handed is None and not records)):
                key = f"{session}:{total['total_tokens']}:{total['input_tokens']}:{total['output_tokens']}"
                counted.append(_call(key, model, at, usage, None, provider))
                if len(counted) > agent_calls.MAX_HELD:
                    handed = "counted"
                    yield from ((call, None) for call in counted)
                    counted.clear()
    for call in records or counted:  # once counts were handed on, no record is kept
        yield call, None


def _call(key: str, model: str, at: Any, usage: dict[str, Any], response_id: str | None, provider: str) -> LoggedCall:
    return LoggedCall(
        agent=AGENT,
        key=key,
        model=model,
        at=at,
        usage=usage,
        response_id=response_id,
        route="direct" if provider == "openai" else provider,
    )


def _usage(logged: Any) -> dict[str, Any] | None:
    """Codex's usage as a Responses `usage` object; None unless input and output are counts."""
    if not isinstance(logged, dict):
        return None
    inputs, outputs = count(logged.get("input_tokens")), count(logged.get("output_tokens"))
    if inputs is None or outputs is None:
        return None
    usage: dict[str, Any] = {"input_tokens": inputs, "output_tokens": outputs}
    cached, reasoning = count(logged.get("cached_input_tokens")), count(logged.get("reasoning_output_tokens"))
    if cached is not None:
        usage["input_tokens_details"] = {"cached_tokens": cached}
    if reasoning is not None:
        usage["output_tokens_details"] = {"reasoning_tokens": reasoning}
    total = count(logged.get("total_tokens"))
    usage["total_tokens"] = total if total is not None else inputs + outputs
    return usage
