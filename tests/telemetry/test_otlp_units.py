"""The small rules of the span export: settings and their one-line errors (flags and
`[otlp]`, through the real CLI), the provider and operation names of the GenAI
conventions, deterministic ids and trace keys, and `export --format otlp` against an
endpoint that never answers (exit 1, one line, no traceback, no header value printed).

Not responsible for spans on the wire (test_otlp_export.py), their values against
export's (test_otlp_history.py) or against the stored verdicts (test_stored_verdicts.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from llmtap.telemetry.otlp import headers_from, settings_from
from llmtap.telemetry.otlp_spans import ids_for, provider_name, trace_key
from tests.helpers import free_port, llmtap


@pytest.mark.parametrize(
    ("flag", "section", "endpoint"),
    [
        ("http://127.0.0.1:4318", None, "http://127.0.0.1:4318/v1/traces"),
        ("https://collector.example:4318/", None, "https://collector.example:4318/v1/traces"),
        ("http://c:4318/custom/traces", None, "http://c:4318/custom/traces"),
        (None, {"endpoint": "http://c:4318"}, "http://c:4318/v1/traces"),
        ("http://flag:1", {"endpoint": "http://table:2"}, "http://flag:1/v1/traces"),  # the flag wins
    ],
)
def test_endpoints(flag: str | None, section: Any, endpoint: str) -> None:
    found = settings_from(flag, section)
    assert found is not None and found.endpoint == found.options.endpoint == endpoint


@pytest.mark.parametrize(
    ("flag", "section", "message"),
    [
        ("ftp://c:4318", None, "http:// or https://"),
        ("c:4318", None, "http:// or https://"),
        ("http://c:99999", None, "http:// or https://"),
        (None, {}, "needs endpoint"),
        (None, "http://c", "must be a table"),
        (None, {"endpoint": "http://c", "max_queue": 0}, "max_queue must be above 0"),
        (None, {"endpoint": "http://c", "max_queue": True}, "max_queue must be a whole number, not true"),
        (None, {"endpoint": "http://c", "compression": "zstd"}, "'gzip' or 'none', not 'zstd'"),
        (
            None,
            {"endpoint": "http://c", "headers": {"authorization": 5}},
            r"\[otlp.headers\] authorization must be text",
        ),
        (None, {"endpoint": "http://c", "endpoints": "x"}, "endpoints is not a known key"),
    ],
)
def test_bad_settings_are_one_line_value_errors(flag: str | None, section: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message) as raised:
        settings_from(flag, section)
    assert "\n" not in str(raised.value)


def test_header_values_never_show() -> None:
    found = settings_from(None, {"endpoint": "http://c", "headers": {"Authorization": "Bearer s3cr3t-token"}})
    assert found is not None
    assert found.options.headers == (("authorization", "Bearer s3cr3t-token"),)
    assert "s3cr3t" not in repr(found)
    assert headers_from(["x-team=a=b"]) == (("x-team", "a=b"),)
    with pytest.raises(ValueError, match="NAME=VALUE"):
        headers_from(["no-value-s3cr3t"])


@pytest.mark.parametrize(
    ("provider", "host", "path", "name"),
    [
        ("anthropic", "api.anthropic.com", "/v1/messages", "anthropic"),
        ("openai", "api.openai.com", "/v1/responses", "openai"),
        ("aws", "bedrock-runtime.us-east-1.amazonaws.com", "/model/x/converse", "aws.bedrock"),
        ("azure", "r.openai.azure.com", "/openai/deployments/d/chat/completions", "azure.ai.openai"),
        ("google", "generativelanguage.googleapis.com", "/v1beta/models/g:generateContent", "gcp.gemini"),
        ("google", "us-central1-aiplatform.googleapis.com", "/v1/projects/p/locations/l", "gcp.vertex_ai"),
        (
            "google",
            "127.0.0.1:9000",
            "/v1/projects/p/locations/l/publishers/anthropic/models/c:rawPredict",
            "gcp.vertex_ai",
        ),
        ("api.groq.com", "api.groq.com", "/openai/v1/chat/completions", "groq"),
        ("llm.internal:8000", "llm.internal:8000", "/v1/chat/completions", "llm.internal:8000"),
        (None, None, None, None),
    ],
)
def test_provider_names_follow_the_conventions(
    provider: str | None, host: str | None, path: str | None, name: str | None
) -> None:
    assert provider_name(provider, host, path) == name


def test_ids_are_deterministic_and_per_conversation() -> None:
    assert ids_for("first:a", "x") == ids_for("first:a", "x")
    assert ids_for("first:a", "x")[0] == ids_for("first:a", "y")[0]
    assert ids_for("first:a", "x")[1] != ids_for("first:a", "y")[1]
    assert ids_for("first:a", "x")[0] != ids_for("first:b", "x")[0]
    trace, span = ids_for("first:a", "x")
    assert 0 < trace < 2**128 and 0 < span < 2**64
    # a session's exchanges share the thread's digits whatever their prefix letter
    assert trace_key("sABC", "first-id", "x") == trace_key("cABC", None, "y") == "thread:ABC"
    assert trace_key(None, "first-id", "x") == "first:first-id"
    assert trace_key(None, None, "x") == "first:x"


def test_cli_errors_are_one_line(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'store.db'}"
    for args, message in [
        (("proxy", "--otlp-endpoint", "ftp://c:4318", "--db", db), "http:// or https://"),
        (("export", "--format", "otlp", "--db", db), "needs --endpoint"),
        (("export", "--endpoint", "http://c:4318", "--db", db), "go with --format otlp"),
        (
            ("export", "--format", "otlp", "--endpoint", "http://c", "-o", str(tmp_path / "x"), "--db", db),
            "no --output",
        ),
        (("export", "--format", "otlp", "--endpoint", "http://c", "--header", "s3cr3t", "--db", db), "NAME=VALUE"),
    ]:
        result = llmtap(*args, process=args[0] == "proxy")  # mitmproxy's imports warn in-process
        assert result.code == 2, (args, result.err)
        assert message in result.err and result.err.count("\n") == 1, result.err
        assert "s3cr3t" not in result.err


def test_export_to_an_endpoint_that_never_answers_stops_with_exit_1(tmp_path: Path) -> None:
    from llmtap.storage.engine import make_engine
    from llmtap.storage.ingest import to_record
    from llmtap.storage.migrate import ensure_current
    from llmtap.storage.secrets import KeyFingerprinter
    from llmtap.storage.writer import Writer
    from tests.telemetry.test_otlp_history import traffic

    url = f"sqlite:///{tmp_path / 'store.db'}"
    engine = make_engine(url)
    ensure_current(engine)
    writer = Writer(engine, spool_dir=tmp_path / "spool")
    fingerprinter = KeyFingerprinter.from_file(tmp_path / "home" / "fingerprint.secret")
    for exchange in traffic()[:5]:
        writer.submit(to_record(exchange, fingerprinter=fingerprinter))
    assert writer.close()
    engine.dispose()
    config = tmp_path / "config.toml"
    config.write_text(
        '[otlp]\nhold_seconds = 1\ntimeout_seconds = 0.5\nheaders = { authorization = "Bearer s3cr3t" }\n'
    )
    nobody = f"http://127.0.0.1:{free_port()}/v1/traces"
    env = {"LLMTAP_HOME": str(tmp_path / "home")}
    result = llmtap("export", "--format", "otlp", "--endpoint", nobody, "--config", str(config), "--db", url, env=env)
    assert result.code == 1, result.err
    assert "0 spans sent" in result.err and "did not take spans for 1 s" in result.err
    assert "s3cr3t" not in result.err and "Traceback" not in result.err


def test_the_hand_over_is_bounded_and_never_waits(tmp_path: Path) -> None:
    import threading

    from llmtap.storage import verdicts
    from llmtap.storage.ingest import to_record
    from llmtap.storage.rows import RowSet, rows_for
    from llmtap.storage.secrets import KeyFingerprinter
    from llmtap.telemetry.otlp import SpanObserver
    from llmtap.telemetry.otlp_export import ExportOptions
    from tests.telemetry.otlp_receiver import Receiver
    from tests.telemetry.test_otlp_history import traffic

    fingerprinter = KeyFingerprinter.from_file(tmp_path / "fingerprint.secret")
    records = [rows_for(to_record(e, fingerprinter=fingerprinter)) for e in traffic()[:12]]
    first, second = RowSet(), RowSet()
    for n, rows in enumerate(records):
        (first if n < 6 else second).extend(rows)
    verdicts.keyed([*first.exchanges, *second.exchanges])  # each verdict column in its place, as the writer hands them
    with Receiver() as receiver:
        observer = SpanObserver(ExportOptions(endpoint=receiver.url, max_queue=10, delay_ms=50))
        held = threading.Event()
        done: list[int] = []  # the threads whose mapping got past `held`
        spans = observer._spans

        def held_spans(rows: RowSet) -> None:
            held.wait(10)  # only the test releases it, unless observe waited on it
            done.append(threading.get_ident())
            spans(rows)

        observer._spans = held_spans  # type: ignore[method-assign]
        observer.observe(first)  # 6 wait
        observer.observe(second)  # 6 more would be 12 > 10: dropped, counted
        # both returned while the mapping is still held: the writer's thread never waits on it
        assert (done, observer.skipped) == ([], 6)
        held.set()
        observer.close()
        got = receiver.taken()
    assert len(got) == 6 and done and threading.get_ident() not in done  # mapped on the observer's thread
    assert sorted(s.attributes["llmtap.exchange.id"] for s in got) == sorted(r["id"] for r in first.exchanges)
