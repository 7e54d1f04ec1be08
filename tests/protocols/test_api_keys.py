"""Which credential is a request's key (protocols/api_keys.py): the one its destination
reads, whatever else it carries (SPEC §4)."""

from __future__ import annotations

import pytest

from llmtap.protocols.api_keys import destination_order, request_keys
from llmtap.storage.teams import attribute

JUNK = "junk-credential-0000"
KEY = "the-destination-key-1234"

# (protocol, host, path, the headers the destination reads its key from, query)
CASES = [
    ("anthropic.messages", "api.anthropic.com", "/v1/messages", [("x-api-key", KEY)], ""),
    ("anthropic.messages", "api.anthropic.com", "/v1/messages", [("Authorization", f"Bearer {KEY}")], ""),
    ("openai.chat", "api.openai.com", "/v1/chat/completions", [("Authorization", f"Bearer {KEY}")], ""),
    ("openai.responses", "api.openai.com", "/v1/responses", [("authorization", f"Bearer {KEY}")], ""),
    ("openai.chat", "gateway.local", "/v1beta/openai/chat/completions", [("authorization", f"Bearer {KEY}")], ""),
    ("openai.responses", "r.openai.azure.com", "/openai/v1/responses", [("Authorization", f"Bearer {KEY}")], ""),
    (
        "openai.chat",
        "r.openai.azure.com",
        "/openai/deployments/gpt4o/chat/completions?api-version=2024-10-21",
        [("api-key", KEY)],
        "api-version=2024-10-21",
    ),
    (
        "gemini.generate",
        "generativelanguage.googleapis.com",
        "/v1beta/models/gemini-2.0-flash:generateContent",
        [("x-goog-api-key", KEY)],
        "",
    ),
    (
        "gemini.generate",
        "generativelanguage.googleapis.com",
        f"/v1beta/models/gemini-2.0-flash:generateContent?key={KEY}",
        [],
        f"key={KEY}",
    ),
    (
        "gemini.generate",
        "us-central1-aiplatform.googleapis.com",
        "/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.0-flash:generateContent",
        [("Authorization", f"Bearer {KEY}")],
        "",
    ),
    (
        "anthropic.messages",
        "bedrock-runtime.us-east-1.amazonaws.com",
        "/model/anthropic.claude-3-haiku/invoke",
        [("Authorization", f"Bearer {KEY}")],
        "",
    ),
]


@pytest.mark.parametrize(("protocol", "host", "path", "headers", "query"), CASES)
def test_the_destinations_credential_is_the_key_whatever_else_comes(
    protocol: str, host: str, path: str, headers: list[tuple[str, str]], query: str
) -> None:
    # junk in every header the destination does not read, before or after its own
    junk_headers = [h for h in ("x-api-key", "x-goog-api-key", "api-key", "authorization") if h not in
                    destination_order(protocol, host, path)]  # fmt: skip
    assert junk_headers
    for name in junk_headers:
        junk = (name, f"Bearer {JUNK}" if name == "authorization" else JUNK)
        for sent in ([junk, *headers], [*headers, junk]):
            keys = request_keys(sent, query, protocol=protocol, host=host, path=path)
            assert keys[0] == KEY, (sent, keys)
            assert set(keys) == {KEY, JUNK}  # every credential is counted


def test_without_a_destination_the_first_in_the_old_order() -> None:
    assert request_keys([("authorization", f"Bearer {KEY}"), ("x-api-key", JUNK)]) == (JUNK, KEY)
    assert request_keys([], "key=abc&x=1") == ("abc",)
    assert request_keys([("authorization", "Basic dXNlcjpwdw==")]) == ()


def test_a_listener_provider_names_the_destination() -> None:
    """A reverse listener for Azure on 127.0.0.1: the path alone would not say Azure."""
    headers = [("authorization", f"Bearer {JUNK}"), ("api-key", KEY)]
    keys = request_keys(
        headers, protocol="openai.chat", host="127.0.0.1", path="/openai/deployments/x/chat/completions"
    )
    assert keys[0] == KEY
    keys = request_keys(headers, protocol="openai.responses", host="127.0.0.1", path="/v1/responses", provider="azure")
    assert keys[0] == JUNK  # Azure v1 reads the bearer first


def test_the_key_map_takes_the_destinations_key_first_then_any_other() -> None:
    teams = {"fp-key": "search", "fp-other": "infra"}
    common = {"proxy_user": None, "team_header": None, "listener_team": None, "key_teams": teams}
    assert attribute(fingerprint="fp-key", carried=("fp-other",), **common) == ("search", "key_map")
    assert attribute(fingerprint="fp-unknown", carried=("fp-other",), **common) == ("infra", "key_map")
    assert attribute(fingerprint="fp-unknown", carried=("fp-none",), **common) == ("unattributed", "none")
