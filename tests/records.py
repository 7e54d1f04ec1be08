"""Stored rows read back in the shape `tests.protocols.corpus.differences` compares, for
the tests that check what the proxy wrote (tests/addon, tests/e2e)."""

from __future__ import annotations

from typing import Any


def canonical(row: dict[str, Any]) -> dict[str, Any]:
    """A stored row in the shape `tests.protocols.corpus.differences` compares."""
    usage = None
    if row["usage_provenance"] != "missing":
        usage = {
            "input_tokens": row["usage_input_tokens"],
            "cache_read_tokens": row["usage_cache_read_input_tokens"],
            "cache_write_tokens": row["usage_cache_creation_input_tokens"],
            "output_tokens": row["usage_output_tokens"],
            "reasoning_tokens": row["usage_reasoning_output_tokens"],
        }
    calls = [
        {"id": c["call_id"], "name": c["name"], "arguments": c["arguments"], "valid_json": c["valid_json"]}
        for c in row["tool_calls"]
    ]
    error = {"type": row["error_type"], "code": row["error_code"]} if row["error_type"] or row["error_code"] else None
    return {
        "model": row["model"],
        "finish_reason": row["finish_reason"],
        "usage": usage,
        "tool_calls": calls,
        "text": row["text"],
        "reasoning_blocks": row["reasoning_blocks"],
        "error": error,
    }
