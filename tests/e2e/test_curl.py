"""curl through the reverse listeners: the wire bytes (`--raw` keeps the chunked framing),
streaming without buffering, the stored record, and what is not recorded."""

from __future__ import annotations

import gzip
import json

from tests.e2e import harness
from tests.e2e.harness import Proxy, Reply


def _post(proxy: Proxy, listener: str, path: str, body: bytes, token: str, *headers: str) -> tuple[bytes, list[float]]:
    args = [
        f"{proxy.base(listener)}{path}",
        "-H",
        "content-type: application/json",
        "-H",
        f"{harness.CASE_HEADER}: {token}",
    ]
    for header in headers:
        args += ["-H", header]
    return harness.curl([*args, "--data-binary", body.decode()])


def test_anthropic_stream_bytes_timing_and_record(proxy: Proxy) -> None:
    c = harness.case("a_anth_stream_text_basic")
    token = proxy.routes.add(harness.stream_reply(c))
    key = proxy.key(harness.ANTHROPIC_KEY)
    assert c.request is not None
    raw, times = _post(proxy, "anthropic", "/v1/messages", c.request, token, f"x-api-key: {key}")

    (seen,) = proxy.routes.done(token)
    assert harness.dechunk(raw) == [chunk for _, chunk in seen.sent]  # same bytes, same chunks
    assert b"".join(harness.dechunk(raw)) == c.response
    harness.assert_streamed(times[0], seen)
    assert seen.headers["x-api-key"] == key  # the key itself still goes where it must

    row = proxy.record(key)
    harness.assert_matches_case(row, c)
    harness.assert_timings(row)
    harness.assert_key_fields(row, proxy, key)
    assert row["team"] == "team-anthropic"  # the reverse listener's team
    assert row["path"] == "/v1/messages" and row["method"] == "POST"


def test_gzip_stream_passes_compressed_bytes_and_decodes(proxy: Proxy) -> None:
    c = harness.case("a_anth_stream_thinking_signature")
    token = proxy.routes.add(harness.stream_reply(c, encoding="gzip"))
    key = proxy.key(harness.ANTHROPIC_KEY)
    assert c.request is not None
    raw, times = _post(
        proxy, "anthropic", "/v1/messages", c.request, token, f"x-api-key: {key}", "accept-encoding: gzip"
    )

    (seen,) = proxy.routes.done(token)
    chunks = harness.dechunk(raw)
    assert chunks == [chunk for _, chunk in seen.sent]  # compressed, flushed per event, untouched
    assert gzip.decompress(b"".join(chunks)) == c.response
    harness.assert_streamed(times[0], seen)

    row = proxy.record(key)
    harness.assert_matches_case(row, c)
    harness.assert_timings(row)


def test_interactions_stream_with_team_header(proxy: Proxy) -> None:
    c = harness.case("b_gint_text_sse")
    token = proxy.routes.add(harness.stream_reply(c))
    key = proxy.key(harness.GOOGLE_KEY)
    body = json.dumps({"model": "gemini-2.5-flash", "input": "How are you?", "stream": True}).encode()
    raw, times = _post(
        proxy, "gemini", "/v1beta/interactions?alt=sse", body, token, f"x-goog-api-key: {key}", "X-LLMTap-Team: curlers"
    )

    (seen,) = proxy.routes.done(token)
    assert b"".join(harness.dechunk(raw)) == harness.sent_bytes(seen) == c.response
    harness.assert_streamed(times[0], seen)
    assert "x-llmtap-team" not in seen.headers  # our header is not forwarded

    row = proxy.record(key)
    harness.assert_matches_case(row, c)
    harness.assert_timings(row)
    harness.assert_key_fields(row, proxy, key)
    assert row["team"] == "curlers"
    assert row["provider"] == "google"


def test_query_key_is_fingerprinted_and_redacted(proxy: Proxy) -> None:
    c = harness.case("b_gem_max_tokens_json")
    token = proxy.routes.add(harness.json_reply(c))
    key = proxy.key(harness.GOOGLE_KEY)
    assert c.request is not None
    raw, _ = _post(proxy, "gemini", f"/v1beta/models/gemini-2.5-flash:generateContent?key={key}", c.request, token)

    (seen,) = proxy.routes.done(token)
    assert b"".join(harness.dechunk(raw)) == c.response
    assert key in seen.path  # forwarded as sent

    row = proxy.record(key)
    harness.assert_matches_case(row, c)
    harness.assert_timings(row, token=False)
    harness.assert_key_fields(row, proxy, key)
    assert key not in row["path"] and "key=" in row["path"]
    assert row["team"] == "unattributed"  # the gemini listener has no team


def test_non_llm_paths_pass_through_unrecorded(proxy: Proxy) -> None:
    models = b'{"object": "list", "data": [{"id": "gpt-4o", "object": "model"}]}'
    count = b'{"input_tokens": 12}'
    key = proxy.key(harness.ANTHROPIC_KEY)
    token_models = proxy.routes.add(Reply(chunks=[models]))
    token_count = proxy.routes.add(Reply(chunks=[count]))
    raw, _ = harness.curl(
        [
            f"{proxy.base('openai')}/v1/models",
            "-H",
            f"{harness.CASE_HEADER}: {token_models}",
            "-H",
            f"authorization: Bearer {key}",
        ]
    )
    assert b"".join(harness.dechunk(raw)) == models
    body = b'{"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hi"}]}'
    raw, _ = _post(proxy, "anthropic", "/v1/messages/count_tokens", body, token_count, f"x-api-key: {key}")
    assert b"".join(harness.dechunk(raw)) == count
    assert len(proxy.routes.seen(token_models)) == len(proxy.routes.seen(token_count)) == 1

    # A generation sent afterwards is recorded; by then the two above would have been too.
    c = harness.case("a_anth_json_text_max_tokens")
    later = proxy.key(harness.ANTHROPIC_KEY)
    token = proxy.routes.add(harness.json_reply(c))
    assert c.request is not None
    _post(proxy, "anthropic", "/v1/messages", c.request, token, f"x-api-key: {later}")
    harness.assert_matches_case(proxy.record(later), c)
    assert proxy.rows(key) == []


def test_tags_header_is_recorded_not_forwarded(proxy: Proxy) -> None:
    c = harness.case("a_anth_stream_text_basic")
    token = proxy.routes.add(harness.stream_reply(c))
    key = proxy.key(harness.ANTHROPIC_KEY)
    assert c.request is not None
    body = json.loads(c.request)
    body["metadata"] = {"user_id": "user-7"}
    _post(
        proxy,
        "anthropic",
        "/v1/messages",
        json.dumps(body).encode(),
        token,
        f"x-api-key: {key}",
        "X-LLMTap-Tags: project=atlas,feature=search",
    )

    (seen,) = proxy.routes.done(token)
    assert "x-llmtap-tags" not in seen.headers  # our header is not forwarded
    row = proxy.record(key)
    assert json.loads(row["tags"]) == {"feature": "search", "project": "atlas"}
    assert row["end_user"] == "user-7"
