"""Header values read off the wire (protocols/headers.py): the session id, the proxy-auth
user name and the retry delay, as the proxy and the importers both read them."""

from __future__ import annotations

import base64

from llmtap.protocols.headers import TEAM_HEADER, proxy_auth_user, retry_after, session_headers, session_id


def test_session_ids_are_read_from_the_documented_headers_only() -> None:
    assert session_id([("X-Claude-Code-Session-Id", "9f1c-aa"), ("session_id", "codex")]) == "9f1c-aa"
    assert session_id([("conversation_id", "conv-1"), ("session_id", "sess-1")]) == "sess-1"
    assert session_id([("Conversation_ID", "conv-1")]) == "conv-1"
    # an installation id, a redacted value, free text and an overlong value are no session ids
    assert session_id([("x-gemini-api-privileged-user-id", "install-1")]) is None
    assert session_id([("session_id", "[REDACTED]")]) is None
    assert session_id([("session_id", "two words")]) is None
    assert session_id([("session_id", "a" * 129)]) is None
    assert session_id([("session_id", "\x1b[2J")]) is None
    assert session_id([("session_id", "a" * 128)]) == "a" * 128
    assert session_id(None) is None
    raw = [(b"Content-Type", b"application/json"), (b"X-Claude-Code-Session-Id", b"s-1"), (b"x-api-key", b"secret")]
    assert session_headers(raw) == [("X-Claude-Code-Session-Id", "s-1")]


def test_the_proxy_auth_user_is_the_basic_credentials_user_name() -> None:
    def basic(text: str) -> str:
        return "Basic " + base64.b64encode(text.encode()).decode()

    assert proxy_auth_user(basic("agents:pw")) == "agents"
    assert proxy_auth_user(basic("team%20a:pw")) == "team a"  # percent-encoded, as curl sends it
    assert proxy_auth_user("basic " + base64.b64encode(b"ops").decode()) == "ops"
    assert proxy_auth_user(basic(":pw")) is None
    assert proxy_auth_user("Bearer abc") is None
    assert proxy_auth_user("Basic") is None
    assert proxy_auth_user(None) is None
    assert proxy_auth_user("") is None
    assert TEAM_HEADER == "x-llmtap-team"  # lower case: compared with lowered header names


def test_retry_after_prefers_milliseconds_and_leaves_dates_out() -> None:
    assert retry_after("20", "1500") == 1.5
    assert retry_after("20") == 20.0
    assert retry_after(" 2.5 ") == 2.5
    assert retry_after("-3") == 0.0
    assert retry_after("Wed, 21 Oct 2015 07:28:00 GMT") is None
    assert retry_after("oops", "250") == 0.25
    assert retry_after(None, "x") is None
    assert retry_after(None) is None
