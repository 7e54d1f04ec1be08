"""`llmtap proxy --otlp-endpoint` end to end: the real proxy (console script, its writer
process) in front of a local upstream that plays the corpus's recorded responses, and a
real OTLP/HTTP receiver (opentelemetry-proto decoding) that is stopped for 30 seconds
while traffic flows, then started again on the same port.

Shows: the store has every exchange whatever the receiver does; every stored exchange
arrives exactly once as a span, its values equal to `llmtap export`'s; the outage is one
line in the proxy's log when it starts and one when it ends; the spans that arrive after
the receiver returns are counted (printed: run with -s to see the figures).

Not responsible for the span's mapping in detail (test_otlp_history.py) or the pipeline's
queue bound (test_otlp_export.py).
"""

from __future__ import annotations

import itertools
import json
import signal
import sqlite3
import subprocess
import time
import urllib.error
import urllib.request
from decimal import Decimal
from pathlib import Path

import pytest

from llmtap.simulator.upstream import Upstream
from tests.e2e import harness
from tests.helpers import free_port, llmtap
from tests.protocols.corpus import Case, load_cases
from tests.telemetry.otlp_receiver import Receiver
from tests.telemetry.test_otlp_history import check_against_export

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

OUTAGE_S = 30.0
KEYS = {"anthropic": harness.ANTHROPIC_KEY, "openai": harness.OPENAI_KEY, "gemini": harness.GOOGLE_KEY}


def _listener(case: Case) -> str:
    protocol = case.case["protocol"]
    return protocol.split(".")[0].replace("google", "gemini")


def _send(ports: dict[str, int], keys: dict[str, str], case: Case, token: str, team: str) -> int:
    listener = _listener(case)
    key = keys[listener]
    headers = {"content-type": "application/json", harness.CASE_HEADER: token, "X-LLMTap-Team": team}
    headers |= {
        "anthropic": {"x-api-key": key, "anthropic-version": "2023-06-01"},
        "openai": {"authorization": f"Bearer {key}"},
        "gemini": {"x-goog-api-key": key},
    }[listener]
    url = f"http://127.0.0.1:{ports[listener]}{case.case['path']}"
    request = urllib.request.Request(url, data=case.request, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=20) as response:
            response.read()
            return int(response.status)
    except urllib.error.HTTPError as error:
        error.read()
        return int(error.code)


def _stored(db: Path) -> int:
    with sqlite3.connect(db) as connection:
        try:
            return int(connection.execute("SELECT count(*) FROM exchanges").fetchone()[0])
        except sqlite3.OperationalError:
            return 0


def _settled(db: Path, sent: int, timeout: float = 60.0) -> int:
    """The store's count once it holds every exchange sent (generations only: all here)."""
    deadline = time.monotonic() + timeout
    while (found := _stored(db)) < sent:
        if time.monotonic() > deadline:
            raise AssertionError(f"the store has {found} exchanges, not {sent}")
        time.sleep(0.1)
    return found


def test_spans_survive_a_receiver_away_for_30_seconds(tmp_path: Path) -> None:
    cases = [
        c
        for c in load_cases()
        if c.request is not None and c.case["protocol"].split(".")[0] in ("anthropic", "openai", "gemini")
    ]
    assert len(cases) >= 40
    routes = harness.Routes()
    tokens = {c.id: routes.add(harness.stream_reply(c) if c.case["streamed"] else harness.json_reply(c)) for c in cases}
    receiver = Receiver().start()
    db = tmp_path / "llmtap.db"
    log = tmp_path / "proxy.log"
    with Upstream(routes) as upstream:
        ports = {name: free_port() for name in KEYS}
        args = [
            str(harness.LLMTAP), "proxy", "--quiet",
            "--db", f"sqlite:///{db}",
            "--confdir", str(tmp_path / "mitmproxy"),
            "--otlp-endpoint", f"http://127.0.0.1:{receiver.port}",
        ]  # fmt: skip
        for name in KEYS:
            args += ["--reverse", f"{name}={ports[name]}", "--upstream", f"{name}={upstream.url}"]
        env = harness.clean_env(LLMTAP_HOME=str(tmp_path / "home"))
        with log.open("wb") as out:
            proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=out)
        keys = {name: harness.canary(prefix) for name, prefix in KEYS.items()}
        sent = 0
        try:
            for port in ports.values():
                harness.wait_for_port(port, proc, log)
            for index, case in enumerate(cases):  # before: the receiver takes everything
                _send(ports, keys, case, tokens[case.id], team=f"team-{'ab'[index % 2]}")
                sent += 1
            before = _settled(db, sent)
            receiver.wait_for(before)

            receiver.stop()  # away: nothing listens on its port
            away_until = time.monotonic() + OUTAGE_S
            sent_while_away = 0
            for case in itertools.cycle(cases):
                if time.monotonic() > away_until:
                    break
                _send(ports, keys, case, tokens[case.id], team="team-away")
                sent += 1
                sent_while_away += 1
                time.sleep(0.1)
            during = _settled(db, sent)  # the store took everything while the receiver was away
            assert len(receiver.taken()) == before

            receiver.start()  # back, on the same port
            for case in cases[:10]:
                _send(ports, keys, case, tokens[case.id], team="team-after")
                sent += 1
            total = _settled(db, sent)
            spans = receiver.wait_for(total, timeout=90)
        finally:
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(60)
            receiver.stop()
    text = log.read_text(errors="replace")
    assert code == 0, text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    assert text.count("does not take spans") == 1, text[-3000:]
    assert text.count("takes spans again") == 1, text[-3000:]
    assert "Transient error" not in text and "Queue full" not in text  # no line per retry or span

    exported = llmtap("export", "--db", f"sqlite:///{db}", env={"LLMTAP_HOME": str(tmp_path / "home")})
    assert exported.code == 0, exported.err
    rows = {r["id"]: r for r in (json.loads(line, parse_float=Decimal) for line in exported.out.splitlines())}
    assert len(rows) == total == sent
    received = [s.attributes["llmtap.exchange.id"] for s in spans]
    assert len(received) == len(set(received)) == total  # each exchange once
    for span in spans:
        check_against_export(span, rows[span.attributes["llmtap.exchange.id"]])
        assert not any(key in json.dumps(span.attributes) for key in keys.values())
    after = total - before
    print(
        f"\notlp e2e: {before} spans before the outage, {sent_while_away} exchanges stored while the receiver "
        f"was away {OUTAGE_S:.0f} s ({during} in the store then), {after} spans arrived after it returned "
        f"({sent_while_away} held through the outage + {total - during} sent after), 0 lost"
    )
