"""Requests whose records are costly to build, legitimately: the writer's bounds (SPEC §6)
meet them. `slow_request` costs CPU time, `bloating_request` memory.

Not responsible for sending them (the faults bench, the writer's tests).
"""

from __future__ import annotations

import json


def slow_request(messages: int) -> bytes:
    """An Anthropic request of many tiny messages: cheap on the wire (~70 bytes each), a
    few tens of microseconds each to decode (100,000: about 7 MB and seconds of CPU)."""
    turns = [
        {"role": ("user", "assistant")[n % 2], "content": [{"type": "text", "text": f"x{n}"}]} for n in range(messages)
    ]
    return json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": turns}).encode()


def bloating_request(megabytes: int, messages: int = 20_000) -> bytes:
    """An Anthropic request with an extra field of empty objects: 3 bytes each on the wire,
    a Python dict of 64 bytes each once parsed (15 MB: about 400 MB while it is built), and
    enough messages that its build holds that memory for a second or more."""
    empties = b",".join([b"{}"] * (megabytes * 1_000_000 // 3))
    head = slow_request(messages)[:-1]  # without its closing brace
    return head + b', "padding": [' + empties + b"]}"
