"""The side routes of background work (SPEC §1): which request continues an exchange
recorded earlier, rather than starting one.

A `background: true` Responses call or interaction answers its POST at once (`queued`,
`in_progress`, no usage); the client then polls it, resumes its stream, or cancels it:

- `GET …/v1/responses/{id}`: a poll (https://platform.openai.com/docs/api-reference/responses/get);
  with `?stream=true` (and `starting_after=N`) a resumed stream
  (https://platform.openai.com/docs/guides/background);
- `POST …/v1/responses/{id}/cancel`: a cancel
  (https://platform.openai.com/docs/api-reference/responses/cancel);
- `GET …/v1beta/interactions/{id}` (`v1`, `v1alpha` too): a poll; with `?stream=true` (and
  `last_event_id=E`) a resumed stream; `POST …/interactions/{id}/cancel`: a cancel
  (https://ai.google.dev/api/interactions-api).

A poll's body is the Response / Interaction object, a resumed stream carries the same
events as the POST's stream: each is decoded by its protocol's translator. Sub-resources
(`…/responses/{id}/input_items`), deletes and the POST routes of SPEC §1
(`…/responses/compact`, `…/responses/input_tokens`) are not follow-ups.

Not responsible for what a follow-up changes in the store (storage/followups.py) nor for
routing generations (routing.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import parse_qsl, unquote

FollowUpKind = Literal["poll", "resume", "cancel"]
KINDS: tuple[FollowUpKind, ...] = ("poll", "resume", "cancel")

# States of a background response / interaction that end it: the poll that states one
# brings the exchange's outcome (and usage). Responses:
# https://platform.openai.com/docs/api-reference/responses/object#responses/object-status
# Interactions also end in `requires_action` (the client must answer a tool call) and
# `budget_exceeded`.
TERMINAL_STATES = frozenset(("completed", "failed", "incomplete", "cancelled", "requires_action", "budget_exceeded"))

# The request a follow-up's response is decoded with, in place of the GET's empty body: it
# continues background work, and an Interaction object does not say so itself (only its
# create request does).
CONTINUES = b'{"background": true}'

# `{id}` is one path segment. The words POST routes use at that place are no ids.
_ID = r"(?P<id>[^/?#]+)"
_NOT_IDS = frozenset(("compact", "input_tokens"))
_RESPONSES = re.compile(r"/responses/" + _ID + r"(?P<cancel>/cancel)?$")
# The versions routing.py records interactions under, after any prefix (a gateway's).
_INTERACTIONS = re.compile(r"/v1(?:beta|alpha)?/interactions/" + _ID + r"(?P<cancel>/cancel)?$")
_MAX_ID = 255  # exchanges.response_id


@dataclass(frozen=True, slots=True)
class FollowUpRoute:
    """A request that continues a background exchange: what it does, in which protocol,
    and the provider's id of the response or interaction it names."""

    kind: FollowUpKind
    protocol: str
    response_id: str


def follow_up(method: str, path: str) -> FollowUpRoute | None:
    """The follow-up a request is, or None: a GET poll or resumed stream, a POST cancel.

    `path` may carry a query string (`?stream=true` makes a GET a resumed stream)."""
    verb = method.upper()
    if verb not in ("GET", "POST"):
        return None
    bare, _, query = path.partition("#")[0].partition("?")
    bare = bare.rstrip("/")
    for pattern, protocol in ((_RESPONSES, "openai.responses"), (_INTERACTIONS, "gemini.interactions")):
        found = pattern.search(bare)
        if found is None:
            continue
        response_id = unquote(found["id"])
        if response_id in _NOT_IDS or not response_id or len(response_id) > _MAX_ID:
            return None
        cancel = found["cancel"] is not None
        if cancel != (verb == "POST"):  # a POST to `{id}` or a GET of `{id}/cancel` is something else
            return None
        if cancel:
            return FollowUpRoute("cancel", protocol, response_id)
        return FollowUpRoute("resume" if _streams(query) else "poll", protocol, response_id)
    return None


def _streams(query: str) -> bool:
    """`stream=true` in the query (the SDKs send `true`; any case, and `1`, taken)."""
    for name, value in parse_qsl(query, keep_blank_values=True):
        if name == "stream":
            return value.strip().lower() in ("true", "1")
    return False


def is_terminal(state: str | None) -> bool:
    """Whether a stated status ends the background work."""
    return state in TERMINAL_STATES
