"""The span pipeline (telemetry/otlp_export.py) against a real OTLP/HTTP receiver on
127.0.0.1 that decodes the protobuf: ids, times, kind and attributes arrive as given,
gzipped, with the configured headers; a refusing or stopped endpoint costs one log line
per outage and loses nothing the queue can hold; a full queue drops and counts; close
returns within its bound with the endpoint down.

Not responsible for what a span says about an exchange (test_otlp_spans.py).
"""

from __future__ import annotations

import logging
import threading
import time

import pytest

from llmtap.telemetry.otlp_export import ExportOptions, ExportStats, Sender
from llmtap.telemetry.otlp_spans import SpanParts, ids_for
from tests.telemetry.otlp_receiver import Receiver

pytestmark = pytest.mark.timeout(120)


def parts(n: int, **attributes: object) -> SpanParts:
    trace_id, span_id = ids_for(f"first:conv-{n // 3}", f"exchange-{n}")
    start = 1_764_000_000_000_000_000 + n * 1_000_000_000
    return SpanParts(
        name="chat claude-sonnet-4-5",
        trace_id=trace_id,
        span_id=span_id,
        start_ns=start,
        end_ns=start + 1_234_567_000,
        attributes={"gen_ai.operation.name": "chat", "llmtap.n": n, **attributes},
        error=n % 5 == 4,
    )


def options(url: str, **changes: object) -> ExportOptions:
    given: dict = {"endpoint": url, "delay_ms": 50, "timeout_s": 2.0} | changes
    return ExportOptions(**given)


def test_spans_arrive_as_given_with_headers_and_gzip() -> None:
    with Receiver() as receiver:
        sender = Sender(options(receiver.url, headers=(("authorization", "Bearer collector-token"),)))
        sent = [parts(n, **{"gen_ai.response.finish_reasons": ["end_turn"]}) for n in range(10)]
        for one in sent:
            sender.send(one)
        got = {span.span_id: span for span in receiver.wait_for(10)}
        stats = sender.close()
    assert stats.sent == 10 and stats.dropped == 0 and stats.outages == 0
    for one in sent:
        span = got[f"{one.span_id:016x}"]
        assert span.trace_id == f"{one.trace_id:032x}"
        assert span.parent_span_id == ""  # a root span of its conversation's trace
        assert (span.start_ns, span.end_ns) == (one.start_ns, one.end_ns)
        assert span.kind == 3  # SPAN_KIND_CLIENT
        assert span.status_code == (2 if one.error else 0)  # STATUS_CODE_ERROR, else unset
        assert span.attributes == one.attributes
        assert span.resource["service.name"] == "llmtap"
        assert span.headers["authorization"] == "Bearer collector-token"
        assert span.headers["content-encoding"] == "gzip"
    assert len({s.trace_id for s in got.values()}) == 4  # three exchanges per conversation


def test_a_refusing_endpoint_is_one_outage_and_nothing_is_lost(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    with Receiver() as receiver:
        receiver.refuse = True
        sender = Sender(options(receiver.url))
        for n in range(30):
            sender.send(parts(n))
        deadline = time.monotonic() + 20
        while receiver.refused < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert receiver.refused >= 3 and receiver.taken() == []
        receiver.refuse = False
        for n in range(30, 40):
            sender.send(parts(n))
        got = receiver.wait_for(40)
        stats = sender.close()
    assert sorted(s.attributes["llmtap.n"] for s in got) == list(range(40))  # each once
    assert (stats.outages, stats.sent, stats.dropped, stats.given_up) == (1, 40, 0, 0)
    assert stats.sent_after_outage == 40
    lines = [r.getMessage() for r in caplog.records if "otlp" in r.getMessage() or "opentelemetry" in r.name]
    assert len([m for m in lines if "does not take spans" in m]) == 1
    assert len([m for m in lines if "takes spans again" in m]) == 1
    assert not [r for r in caplog.records if r.name.startswith("opentelemetry")]  # no line per retry


def test_a_stopped_endpoint_that_comes_back_gets_everything() -> None:
    receiver = Receiver().start()
    sender = Sender(options(receiver.url))
    sender.send(parts(0))
    receiver.wait_for(1)
    receiver.stop()  # nothing listens: connection refused
    for n in range(1, 21):
        sender.send(parts(n))
    time.sleep(1.5)
    receiver.start()  # the same port again
    try:
        got = receiver.wait_for(21)
        stats = sender.close()
    finally:
        receiver.stop()
    assert sorted(s.attributes["llmtap.n"] for s in got) == list(range(21))
    assert stats.outages == 1 and stats.sent == 21 and stats.sent_after_outage == 20


def test_a_full_queue_drops_and_counts_and_close_is_bounded(caplog: pytest.LogCaptureFixture) -> None:
    with Receiver() as receiver:
        receiver.refuse = True  # 503 to every try: the SDK retries it, and so does the patient exporter
        # a request's own retries (the SDK's) may run 600 s, and the patient's 300 s: close
        # cuts both at its bound of 1 s
        sender = Sender(options(receiver.url, max_queue=20, batch_size=5, timeout_s=600.0))
        for n in range(100):
            sender.send(parts(n))
        closed: list[ExportStats] = []
        closing = threading.Thread(target=lambda: closed.append(sender.close(timeout_s=1.0)), daemon=True)
        closing.start()
        closing.join(20)  # a bound on the wait only: uncut, the SDK's retries alone run 31 s
        assert closed, "close did not stop the retries at its bound"
        tries = receiver.refused
    stats = closed[0]
    assert 1 <= tries <= 3, tries  # the first batch's try and a retry or two; uncut, the SDK alone makes 6
    assert stats.sent == 0 and stats.outages == 1
    assert stats.dropped >= 100 - 20 - 5  # the queue holds 20, one batch of at most 5 is being retried
    assert stats.dropped + stats.given_up == 100
    logged = [r.getMessage() for r in caplog.records]
    assert len([m for m in logged if "does not take spans" in m]) == 1  # the log is seen: the outage, once
    assert not [m for m in logged if "Queue full" in m]  # each drop counted, not logged
