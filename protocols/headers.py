"""Request and response header values read as the wire carries them: the team header,
the proxy-auth user name, a retry delay, a client's session id.

Pure functions of header text (or raw header fields), shared by the live proxy
(addon/) and the importers (storage/ingest.py), so both read a header alike.

The session headers are the documented ones: Claude Code's `X-Claude-Code-Session-Id`
and Codex's `session_id` (else its `conversation_id`). Gemini CLI sends no session
header (its `x-gemini-api-privileged-user-id` names an installation, not a session: not
used).

Not responsible for what a value decides: which team a request is billed to
(storage/teams.py), whether proxy credentials check (addon/auth.py), or the
conversation a session joins (storage/threads.py); nor for which credential is a
request's key (protocols/api_keys.py).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable
from urllib.parse import unquote

TEAM_HEADER = "x-llmtap-team"

# In order of preference: the first present with a usable value is the session.
SESSION_HEADERS = ("x-claude-code-session-id", "session_id", "conversation_id")
_SESSION_BYTES = tuple(name.encode() for name in SESSION_HEADERS)
SESSION_ID_MAX = 128  # longer values are no session id a client we know sends
_USABLE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+/=-]*")


def proxy_auth_user(value: str | None) -> str | None:
    """The user name of a `Proxy-Authorization: Basic …` header."""
    if not value:
        return None
    scheme, _, token = value.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        user = base64.b64decode(token.strip(), validate=False).decode("utf-8", "replace")
    except ValueError:
        return None
    return unquote(user.partition(":")[0]) or None


def retry_after(seconds: str | None, milliseconds: str | None = None) -> float | None:
    """`retry-after-ms` (OpenAI) or `retry-after` in seconds; an HTTP date is left out."""
    for value, scale in ((milliseconds, 1000.0), (seconds, 1.0)):
        if value:
            try:
                return max(float(value.strip()) / scale, 0.0)
            except ValueError:
                continue
    return None


def session_headers(fields: Iterable[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
    """The session-id headers among raw header fields, as text (for the live proxy's
    `request` hook: one pass over the fields, nothing else kept)."""
    out = []
    for name, value in fields:
        if name.lower() in _SESSION_BYTES:
            out.append((name.decode("latin-1"), value.decode("utf-8", "replace")))
    return out


def session_id(headers: Iterable[tuple[str, str]] | None) -> str | None:
    """The client session id a request's headers carry, or None. Only an id's shape is
    taken (letters, digits and `._:@+/=-`, at most 128 characters): anything else (a
    redacted or scrubbed value, free text) is no session id."""
    found: dict[str, str] = {}
    for name, value in headers or ():
        lowered = name.lower()
        if lowered in SESSION_HEADERS and lowered not in found:
            value = value.strip()
            if 0 < len(value) <= SESSION_ID_MAX and _USABLE.fullmatch(value):
                found[lowered] = value
    return next((found[name] for name in SESSION_HEADERS if name in found), None)
