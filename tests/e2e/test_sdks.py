"""The official SDKs through the reverse listeners, streaming and not: what the SDK parsed,
the raw bytes it received (tapped before content decoding), that streams were not
buffered, and the stored record against the corpus case's expected values."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e import harness
from tests.e2e.harness import Proxy, Wire
from tests.protocols.corpus import Case

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")
genai = pytest.importorskip("google.genai")


def _anthropic(proxy: Proxy, wire: Wire, key: str, token: str, **headers: str) -> Any:
    return anthropic.Anthropic(
        api_key=key,
        base_url=proxy.base("anthropic"),
        http_client=wire.client(),
        max_retries=0,
        default_headers={harness.CASE_HEADER: token, **headers},
    )


def _openai(proxy: Proxy, wire: Wire, key: str, token: str) -> Any:
    return openai.OpenAI(
        api_key=key,
        base_url=proxy.base("openai") + "/v1",
        http_client=wire.client(),
        max_retries=0,
        default_headers={harness.CASE_HEADER: token},
    )


def _genai(proxy: Proxy, wire: Wire, key: str, token: str) -> Any:
    options = genai.types.HttpOptions(
        base_url=proxy.base("gemini"), headers={harness.CASE_HEADER: token}, httpx_client=wire.client()
    )
    return genai.Client(api_key=key, http_options=options)


def _check_stream(proxy: Proxy, wire: Wire, token: str, key: str, c: Case) -> dict[str, Any]:
    (seen,) = proxy.routes.done(token)
    assert wire.last.raw == harness.sent_bytes(seen)  # byte for byte, still encoded if it was
    harness.assert_streamed(wire.last.first_at, seen)
    row = proxy.record(key)
    harness.assert_matches_case(row, c)
    harness.assert_timings(row)
    harness.assert_key_fields(row, proxy, key)
    return row


def _check_json(proxy: Proxy, wire: Wire, token: str, key: str, c: Case) -> dict[str, Any]:
    (seen,) = proxy.routes.done(token)
    assert wire.last.raw == harness.sent_bytes(seen) == c.response
    row = proxy.record(key)
    harness.assert_matches_case(row, c)
    harness.assert_timings(row, token=False)
    harness.assert_key_fields(row, proxy, key)
    return row


# -- Anthropic -----------------------------------------------------------------------------


def test_anthropic_stream_br_with_team_header(proxy: Proxy, wire: Wire) -> None:
    c = harness.case("a_anth_stream_thinking_then_tool_use")
    token = proxy.routes.add(harness.stream_reply(c, encoding="br"))
    key = proxy.key(harness.ANTHROPIC_KEY)
    client = _anthropic(proxy, wire, key, token, **{"X-LLMTap-Team": "research"})
    body = harness.sdk_body(c)
    body.pop("stream")
    with client.messages.stream(**harness.sdk_kwargs(client.messages.stream, body)) as stream:
        final = stream.get_final_message()

    (call,) = c.expect["tool_calls"]
    assert [b.type for b in final.content][-1] == "tool_use"
    assert (final.content[-1].id, final.content[-1].name) == (call["id"], call["name"])
    assert final.stop_reason == "tool_use" and final.model == c.expect["model"]
    (seen,) = proxy.routes.done(token)
    assert "x-llmtap-team" not in seen.headers
    assert wire.last.headers["content-encoding"] == "br"
    row = _check_stream(proxy, wire, token, key, c)
    assert row["team"] == "research"  # the header wins over the listener's team


def test_anthropic_json_parallel_tools(proxy: Proxy, wire: Wire) -> None:
    c = harness.case("a_anth_json_parallel_tools")
    token = proxy.routes.add(harness.json_reply(c))
    key = proxy.key(harness.ANTHROPIC_KEY)
    client = _anthropic(proxy, wire, key, token)
    raw = client.messages.with_raw_response.create(**harness.sdk_kwargs(client.messages.create, harness.sdk_body(c)))
    message = raw.parse()

    assert [b.id for b in message.content if b.type == "tool_use"] == [t["id"] for t in c.expect["tool_calls"]]
    row = _check_json(proxy, wire, token, key, c)
    assert row["team"] == "team-anthropic"


def test_anthropic_error_body(proxy: Proxy, wire: Wire) -> None:
    c = harness.case("a_anth_error_400_invalid_request")
    token = proxy.routes.add(harness.json_reply(c))
    key = proxy.key(harness.ANTHROPIC_KEY)
    client = _anthropic(proxy, wire, key, token)
    with pytest.raises(anthropic.BadRequestError):
        client.messages.create(**harness.sdk_kwargs(client.messages.create, harness.sdk_body(c)))
    row = _check_json(proxy, wire, token, key, c)
    assert row["finish_reason"] == "error" and row["status"] == 400


# -- OpenAI Chat and Responses ----------------------------------------------------------------


def test_openai_chat_stream_tool_call(proxy: Proxy, wire: Wire) -> None:
    c = harness.case("a_oai_stream_tool_call_include_usage")
    token = proxy.routes.add(harness.stream_reply(c))
    key = proxy.key(harness.OPENAI_KEY)
    client = _openai(proxy, wire, key, token)
    chunks = list(
        client.chat.completions.create(**harness.sdk_kwargs(client.chat.completions.create, harness.sdk_body(c)))
    )

    arguments = "".join(
        call.function.arguments or ""
        for chunk in chunks
        for choice in chunk.choices
        for call in choice.delta.tool_calls or []
    )
    (call,) = c.expect["tool_calls"]
    assert harness.json.loads(arguments) == call["arguments"]
    assert chunks[-1].usage is not None and chunks[-1].usage.prompt_tokens == c.expect["usage"]["input_tokens"]
    row = _check_stream(proxy, wire, token, key, c)
    assert row["team"] == "team-openai"


def test_openai_chat_json_content_length(proxy: Proxy, wire: Wire) -> None:
    c = harness.case("a_oai_json_cached_tokens")
    token = proxy.routes.add(harness.json_reply(c, chunked=False))
    key = proxy.key(harness.OPENAI_KEY)
    client = _openai(proxy, wire, key, token)
    completion = client.chat.completions.create(
        **harness.sdk_kwargs(client.chat.completions.create, harness.sdk_body(c))
    )

    assert completion.choices[0].message.content == c.expect["text"]
    assert wire.last.headers["content-length"] == str(len(c.response))
    _check_json(proxy, wire, token, key, c)


def test_openai_responses_stream_function_call(proxy: Proxy, wire: Wire) -> None:
    c = harness.case("b_oai_fc_sse")
    token = proxy.routes.add(harness.stream_reply(c))
    key = proxy.key(harness.OPENAI_KEY)
    client = _openai(proxy, wire, key, token)
    events = list(client.responses.create(**harness.sdk_kwargs(client.responses.create, harness.sdk_body(c))))

    assert events[-1].type == "response.completed"
    (call,) = c.expect["tool_calls"]
    assert [item.call_id for item in events[-1].response.output if item.type == "function_call"] == [call["id"]]
    _check_stream(proxy, wire, token, key, c)


def test_openai_responses_json(proxy: Proxy, wire: Wire) -> None:
    c = harness.case("b_oai_fc_json")
    token = proxy.routes.add(harness.json_reply(c))
    key = proxy.key(harness.OPENAI_KEY)
    client = _openai(proxy, wire, key, token)
    response = client.responses.create(**harness.sdk_kwargs(client.responses.create, harness.sdk_body(c)))

    assert response.model == c.expect["model"]
    _check_json(proxy, wire, token, key, c)


# -- Gemini --------------------------------------------------------------------------------


def _model(c: Case) -> str:
    return c.case["path"].split("/models/", 1)[1].split(":", 1)[0]


def test_gemini_stream_sse(proxy: Proxy, wire: Wire) -> None:
    c = harness.case("b_gem_text_sse")
    token = proxy.routes.add(harness.stream_reply(c))
    key = proxy.key(harness.GOOGLE_KEY)
    client = _genai(proxy, wire, key, token)
    parts = list(client.models.generate_content_stream(model=_model(c), contents=harness.sdk_body(c)["contents"]))

    assert "".join(p.text or "" for p in parts) == c.expect["text"]
    (seen,) = proxy.routes.done(token)
    assert seen.path.endswith(":streamGenerateContent?alt=sse")
    row = _check_stream(proxy, wire, token, key, c)
    assert row["team"] == "unattributed"


def test_gemini_json_function_call(proxy: Proxy, wire: Wire) -> None:
    c = harness.case("b_gem_fc_json")
    token = proxy.routes.add(harness.json_reply(c))
    key = proxy.key(harness.GOOGLE_KEY)
    client = _genai(proxy, wire, key, token)
    response = client.models.generate_content(model=_model(c), contents=harness.sdk_body(c)["contents"])

    assert [f.name for f in response.function_calls or []] == [t["name"] for t in c.expect["tool_calls"]]
    _check_json(proxy, wire, token, key, c)
