"""What a request says about who it is for, besides the team (SPEC §4): the end user it
names and the tags a client sends in `X-LLMTap-Tags`.

The end user is the provider's own field: Anthropic `metadata.user_id`, OpenAI
`safety_identifier` (the newer name) else `user`, Vertex `labels` (its `user_id`, `user`
or `end_user` label: Vertex labels are free key/value pairs and these are the names a
caller uses for a person). A value is text of at most `MAX_USER_CHARS` characters, else
none is kept.

Tags are `name=value` pairs separated by commas (`project=x,feature=y`). Names are
lower-cased and must match `[a-z0-9_-]{1,32}`; values are printable, at most
`MAX_TAG_VALUE_CHARS` characters, trimmed. At most `MAX_TAGS` pairs are kept (the first
ones; a later repeat of a name wins over an earlier one), and a header longer than
`MAX_TAGS_HEADER_CHARS` is read only that far: a client cannot make a record, a report
group or a metric label unbounded. A malformed pair is skipped, never an error.

Not responsible for removing the header before forwarding (addon/attribution.py), for
scrubbing key-shaped values (storage/rows.py), nor for trusting them: they are data
from the client, like a team named in a header.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

TAGS_HEADER = "x-llmtap-tags"
MAX_USER_CHARS = 256
MAX_TAGS = 16
MAX_TAG_VALUE_CHARS = 64
MAX_TAGS_HEADER_CHARS = 2048
TAG_NAME = re.compile(r"[a-z0-9_-]{1,32}")
_VERTEX_USER_LABELS = ("user_id", "user", "end_user")


def _text(value: Any) -> str | None:
    if isinstance(value, str):
        text = value.strip()
        if text and len(text) <= MAX_USER_CHARS and text.isprintable():
            return text
    return None


def anthropic_user(body: Mapping[str, Any]) -> str | None:
    """Anthropic Messages: `metadata.user_id`."""
    metadata = body.get("metadata")
    return _text(metadata.get("user_id")) if isinstance(metadata, Mapping) else None


def openai_user(body: Mapping[str, Any]) -> str | None:
    """OpenAI Chat Completions and Responses: `safety_identifier`, else the older `user`."""
    return _text(body.get("safety_identifier")) or _text(body.get("user"))


def vertex_user(body: Mapping[str, Any]) -> str | None:
    """Gemini generateContent on Vertex: the first of its user labels that is set."""
    labels = body.get("labels")
    if isinstance(labels, Mapping):
        for name in _VERTEX_USER_LABELS:
            found = _text(labels.get(name))
            if found:
                return found
    return None


def parse_tags(values: list[str] | str | None) -> dict[str, str]:
    """The tags of one or more `X-LLMTap-Tags` values (repeated headers read in order)."""
    if not values:
        return {}
    text = ",".join([values] if isinstance(values, str) else values)[:MAX_TAGS_HEADER_CHARS]
    tags: dict[str, str] = {}
    for pair in text.split(","):
        name, equals, value = pair.partition("=")
        name, value = name.strip().lower(), value.strip()
        if not equals or not TAG_NAME.fullmatch(name) or not value:
            continue
        if len(value) > MAX_TAG_VALUE_CHARS or not value.isprintable():
            continue
        if name not in tags and len(tags) >= MAX_TAGS:
            continue
        tags[name] = value
    return tags


def merged(client: Mapping[str, str], configured: Mapping[str, str] | None) -> dict[str, str]:
    """The client's tags with the operator's (a listener's or a key's, from the config)
    over them: a client cannot relabel what the operator named. The operator's come
    first, so the bound on their number never drops one of them."""
    out = dict(configured or {})
    for name, value in client.items():
        if name not in out and len(out) < MAX_TAGS:
            out[name] = value
    return out


def stored_tags(text: object) -> dict[str, str]:
    """The tags a stored row holds (its `tags` column: compact JSON text, storage/rows.py),
    as a dict of text; {} for none or for anything else."""
    if not isinstance(text, str) or not text:
        return {}
    try:
        found = json.loads(text)
    except ValueError:
        return {}
    if not isinstance(found, dict):
        return {}
    return {str(name): value for name, value in found.items() if isinstance(value, str)}
