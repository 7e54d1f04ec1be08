"""The regular proxy: HTTPS to a TLS upstream on https://localhost, intercepted with
mitmproxy's CA, the team taken from the proxy-auth user name. Clients are configured
only the way the user is told to: HTTPS_PROXY and SSL_CERT_FILE (SDK), --cacert (curl)."""

from __future__ import annotations

import gzip

import pytest

from tests.e2e import harness
from tests.e2e.harness import Proxy, Wire

anthropic = pytest.importorskip("anthropic")


def _https(proxy: Proxy, path: str) -> str:
    return f"https://localhost:{proxy.tls_upstream.port}{path}"


def test_sdk_through_regular_proxy(proxy: Proxy, wire: Wire, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "SSL_CERT_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", f"http://team-regular:x@127.0.0.1:{proxy.ports['regular']}")
    monkeypatch.setenv("SSL_CERT_FILE", str(proxy.ca))  # only mitmproxy's CA: interception or failure

    c = harness.case("a_anth_stream_stop_sequence_prefill")
    token = proxy.routes.add(harness.stream_reply(c))
    key = proxy.key(harness.ANTHROPIC_KEY)
    client = anthropic.Anthropic(
        api_key=key,
        base_url=_https(proxy, ""),
        http_client=wire.client(),  # trust_env: the proxy and CA come from the environment
        max_retries=0,
        default_headers={harness.CASE_HEADER: token},
    )
    body = harness.sdk_body(c)
    body.pop("stream")
    with client.messages.create(**harness.sdk_kwargs(client.messages.create, body), stream=True) as stream:
        events = [event.type for event in stream]
    assert events[-1] == "message_stop"

    (seen,) = proxy.routes.done(token)
    assert "proxy-authorization" not in seen.headers
    assert wire.last.url.startswith("https://localhost:")
    assert wire.last.raw == harness.sent_bytes(seen) == c.response
    harness.assert_streamed(wire.last.first_at, seen)
    row = proxy.record(key)
    harness.assert_matches_case(row, c)
    harness.assert_timings(row)
    harness.assert_key_fields(row, proxy, key)
    assert row["team"] == "team-regular"  # the proxy-auth user name
    assert row["host"] == "localhost"


def test_curl_through_regular_proxy_gzip(proxy: Proxy) -> None:
    c = harness.case("a_oai_stream_text_include_usage")
    token = proxy.routes.add(harness.stream_reply(c, encoding="gzip"))
    key = proxy.key(harness.OPENAI_KEY)
    assert c.request is not None
    request = [
        _https(proxy, "/v1/chat/completions"), "-x", f"http://team-curl:x@127.0.0.1:{proxy.ports['regular']}",
        "-H", f"authorization: Bearer {key}", "-H", "content-type: application/json", "-H", "accept-encoding: gzip",
        "-H", f"{harness.CASE_HEADER}: {token}", "--data-binary", c.request.decode(),
    ]  # fmt: skip
    untrusted = harness.curl_status(request)
    assert untrusted == 60, "without mitmproxy's CA the interception must fail verification"
    raw, times = harness.curl(["--cacert", str(proxy.ca), *request])

    (seen,) = proxy.routes.done(token)  # the untrusted attempt never reached the upstream
    chunks = harness.dechunk(raw)
    assert chunks == [chunk for _, chunk in seen.sent]
    assert gzip.decompress(b"".join(chunks)) == c.response
    harness.assert_streamed(times[0], seen)
    row = proxy.record(key)
    harness.assert_matches_case(row, c)
    harness.assert_timings(row)
    assert row["team"] == "team-curl"
    assert row["provider"] == "localhost"  # an OpenAI-compatible server is named by its host
