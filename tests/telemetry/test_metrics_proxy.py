"""`llmtap proxy --metrics` end to end: the real proxy (console script, its writer process)
in front of a local upstream that plays the corpus's recorded responses; `/metrics`
scraped over HTTP and parsed with prometheus-client's own parser; the counters compared
with `llmtap report usage / cost / tools --format json` over the same store, and the
cache counters with the store's own cache verdicts.

Not responsible for the label caps' arithmetic (test_metrics_units.py) or the cache verdicts
themselves (tests/storage/test_verdicts.py).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import signal
import subprocess
import time
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import Engine, text
from sqlalchemy.exc import DBAPIError

from llmtap.protocols.toolcheck import STATUSES
from llmtap.simulator.upstream import Upstream
from llmtap.storage.engine import make_engine
from llmtap.workloads.scratch import scratch_postgres
from tests.e2e import harness
from tests.helpers import free_port, llmtap
from tests.protocols.corpus import Case, load_cases

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

LISTENERS = {"anthropic": "anthropic", "openai": "openai", "gemini": "gemini"}
KEYS = {"anthropic": harness.ANTHROPIC_KEY, "openai": harness.OPENAI_KEY, "gemini": harness.GOOGLE_KEY}
HOSTILE_TEAMS = 10_000
LONG_NAMES = 200
POSTGRES_URL = os.environ.get("LLMTAP_TEST_POSTGRES_URL", "").strip() or None
TOKEN = "scrape-t0ken-of-the-test"  # LLMTAP_METRICS_TOKEN: the store is 0600, so a token is asked for
SCRAPE = {"Authorization": f"Bearer {TOKEN}"}  # as Prometheus' `authorization: {credentials: …}` sends it
OWN = "the endpoint's own name"


def _listener(case: Case) -> str:
    protocol = case.case["protocol"]
    return "anthropic" if protocol.startswith("anthropic") else "openai" if protocol.startswith("openai") else "gemini"


@dataclass
class Running:
    root: Path
    proc: subprocess.Popen[bytes]
    ports: dict[str, int]
    routes: harness.Routes
    keys: dict[str, str]
    url: str  # the store
    engine: Engine

    @property
    def metrics_dir(self) -> Path:
        return self.root / "home" / "spool" / "metrics"

    def headers(self, case: Case, token: str, team: str) -> dict[str, str]:
        listener = _listener(case)
        key = self.keys[listener]
        headers = {"content-type": "application/json", harness.CASE_HEADER: token, "X-LLMTap-Team": team}
        return (
            headers
            | {
                "anthropic": {"x-api-key": key, "anthropic-version": "2023-06-01"},
                "openai": {"authorization": f"Bearer {key}"},
                "gemini": {"x-goog-api-key": key},
            }[listener]
        )

    def send_many(self, case: Case, token: str, teams: list[str]) -> list[int]:
        """One request per team, in turn, over one kept-alive connection."""
        connection = http.client.HTTPConnection("127.0.0.1", self.ports[_listener(case)], timeout=20)
        statuses = []
        try:
            for team in teams:
                headers = self.headers(case, token, team)
                connection.request("POST", case.case["path"], body=case.request, headers=headers)
                response = connection.getresponse()
                response.read()
                statuses.append(response.status)
        finally:
            connection.close()
        return statuses

    def send(self, case: Case, token: str, team: str, body: bytes | None = None) -> int:
        headers = self.headers(case, token, team)
        url = f"http://127.0.0.1:{self.ports[_listener(case)]}{case.case['path']}"
        request = urllib.request.Request(url, data=body or case.request, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=20) as response:
                response.read()
                return int(response.status)
        except urllib.error.HTTPError as error:
            error.read()
            return int(error.code)

    def scrape(self) -> dict[str, list[Any]]:
        text = _get(self.ports["metrics"], "/metrics", SCRAPE)[2].decode()
        files = b"".join(path.read_bytes() for path in self.metrics_dir.rglob("*") if path.is_file())
        for key in self.keys.values():  # never an API key, in the scrape or in the counters' files
            assert key not in text and key.encode() not in files
        return {family.name: family.samples for family in text_string_to_metric_families(text)}

    def settle(self, timeout: float = 60.0) -> dict[str, list[Any]]:
        """The scrape once the writer has nothing left and the store stopped growing."""
        deadline = time.monotonic() + timeout
        last = -1
        while time.monotonic() < deadline:
            families = self.scrape()
            stored = _count(self)
            if _value(families, "llmtap_writer_queue_records") == 0 and stored == last:
                return families
            last = stored
            time.sleep(0.5)
        raise AssertionError("the writer did not settle")


def _get(port: int, path: str, headers: dict[str, str], host: str | None = OWN) -> tuple[int, dict[str, str], bytes]:
    """One GET of 127.0.0.1:`port`, with exactly this Host (OWN: 127.0.0.1:port; None: none)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.putrequest("GET", path, skip_host=True, skip_accept_encoding=True)
        if host is not None:
            connection.putheader("Host", f"127.0.0.1:{port}" if host is OWN else host)
        for name, value in headers.items():
            connection.putheader(name, value)
        connection.endheaders()
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def _sql(running: Running, query: str) -> list[tuple[Any, ...]]:
    with running.engine.connect() as connection:
        return [tuple(row) for row in connection.execute(text(query))]


def _count(running: Running) -> int:
    try:
        return int(_sql(running, "SELECT count(*) FROM exchanges")[0][0])
    except DBAPIError:  # not made yet
        return 0


def _value(families: dict[str, list[Any]], name: str) -> float:
    return sum(s.value for s in families.get(name, []))


def _by(families: dict[str, list[Any]], family: str, sample: str, *labels: str) -> dict[tuple[str, ...], float]:
    out: dict[tuple[str, ...], float] = defaultdict(float)
    for s in families.get(family, []):
        if s.name == sample:
            out[tuple(s.labels[label] for label in labels)] += s.value
    return dict(out)


def _stores() -> Iterator[str]:
    yield "sqlite"
    if POSTGRES_URL:
        yield "postgresql"


@pytest.fixture(scope="module", params=list(_stores()))
def running(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    root = tmp_path_factory.mktemp("metrics")
    with contextlib.ExitStack() as stack:
        if request.param == "sqlite":
            url = f"sqlite:///{root / 'llmtap.db'}"
        else:
            assert POSTGRES_URL is not None
            url = stack.enter_context(scratch_postgres(POSTGRES_URL, "llmtap_metrics"))
        yield from _proxy(root, url)


def _proxy(root: Path, url: str) -> Iterator[Running]:
    routes = harness.Routes()
    with Upstream(routes) as upstream:
        ports = {name: free_port() for name in (*LISTENERS, "metrics")}
        args = [
            str(harness.LLMTAP), "proxy", "--quiet",
            "--db", url,
            "--confdir", str(root / "mitmproxy"),
            "--metrics", f"127.0.0.1:{ports['metrics']}",
        ]  # fmt: skip
        for name in LISTENERS:
            args += ["--reverse", f"{name}={ports[name]}", "--upstream", f"{name}={upstream.url}"]
        log = root / "proxy.log"
        with log.open("wb") as out:
            env = harness.clean_env(LLMTAP_HOME=str(root / "home"), LLMTAP_METRICS_TOKEN=TOKEN)
            proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=out)
        try:
            for port in ports.values():
                harness.wait_for_port(port, proc, log)
            keys = {name: harness.canary(prefix) for name, prefix in KEYS.items()}
            engine = make_engine(url)
            yield Running(root=root, proc=proc, ports=ports, routes=routes, keys=keys, url=url, engine=engine)
            engine.dispose()
        finally:
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(60)
        text = log.read_text(errors="replace")
        assert code == 0, text[-3000:]
        assert "Traceback" not in text, text[-3000:]
        # the run's folder of counter files goes with it
        assert not any(root.joinpath("home", "spool", "metrics").glob("*")), text[-3000:]


def _report(running: Running, kind: str, *extra: str) -> list[dict[str, Any]]:
    result = llmtap("report", kind, "--db", running.url, "--format", "json", *extra)
    assert result.code == 0, result.err
    return list(result.json())


Families = dict[str, list[Any]]


def _tool_problems() -> list[tuple[Case, bytes]]:
    """Corpus exchanges whose request is changed so that the recorded calls break it: a
    call to a tool the request no longer declares, and one whose arguments miss a field
    the schema now requires."""
    cases = {c.id: c for c in load_cases()}
    anthropic = cases["a_anth_json_parallel_tools"]
    request = json.loads(anthropic.request or b"{}")
    request["tools"] = [tool for tool in request["tools"] if tool["name"] != "get_time"]
    openai = cases["a_oai_json_tool_call_single"]
    changed = json.loads(openai.request or b"{}")
    schema = changed["tools"][0]["function"]["parameters"]
    schema["properties"]["c"] = {"type": "number"}
    schema["required"] = [*schema.get("required", []), "c"]
    return [(anthropic, json.dumps(request).encode()), (openai, json.dumps(changed).encode())]


def test_counters_equal_the_reports_for_corpus_traffic(running: Running) -> None:
    cases = [c for c in load_cases() if c.request is not None]
    assert len(cases) >= 40
    # every case twice in a row, with the same key: the second continues the first's line,
    # so the stored cache verdicts have misses
    for index, case in enumerate(cases):
        reply = harness.stream_reply(case) if case.case["streamed"] else harness.json_reply(case)
        token = running.routes.add(reply)
        for _ in range(2):
            running.send(case, token, team=f"team-{'ab'[index % 2]}")
    for case, body in _tool_problems():
        token = running.routes.add(harness.json_reply(case))
        assert running.send(case, token, team="team-tools", body=body) == 200
    families = running.settle()

    stored = _count(running)
    assert stored >= 2 * (len(cases) - 5)  # nearly every case is a generation
    assert _value(families, "llmtap_requests") == stored
    _usage_equals_report_usage(running, families)
    _cost_equals_report_cost(running, families)
    _finish_errors_and_latency_equal_the_store(running, families)
    _cache_equals_the_store_and_tools_their_report(running, families)
    assert _value(families, "llmtap_writer_restarts") == 0
    assert _value(families, "llmtap_rejected_records") == 0
    assert _value(families, "llmtap_spool_records") == 0


def _usage_equals_report_usage(running: Running, families: Families) -> None:
    usage = _report(running, "usage", "--by", "team,provider,model")
    tokens = _by(families, "llmtap_tokens", "llmtap_tokens_total", "team", "provider", "model", "kind")
    requests = _by(families, "llmtap_requests", "llmtap_requests_total", "team", "provider", "model")
    assert len(usage) >= 10
    for row in usage:
        who = (row["team"], row["provider"], row["model"] or "unknown")
        assert requests[who] == row["requests"], who
        for kind, column in (
            ("input", "input_tokens"),
            ("cache_read", "cache_read_tokens"),
            ("cache_write", "cache_write_tokens"),
            ("output", "output_tokens"),
            ("reasoning", "reasoning_tokens"),
        ):
            assert tokens.get((*who, kind), 0) == row[column], (who, kind)
    assert sum(requests.values()) == sum(row["requests"] for row in usage)


def _cost_equals_report_cost(running: Running, families: Families) -> None:
    cost = _report(running, "cost", "--by", "team,provider,model")
    dollars = _by(families, "llmtap_cost_usd", "llmtap_cost_usd_total", "team", "provider", "model")
    priced = [row for row in cost if row["cost_usd"] is not None]
    assert priced, "the corpus prices some exchanges"
    for row in cost:
        who = (row["team"], row["provider"], row["model"] or "unknown")
        expected = Decimal(str(row["cost_usd"] or 0))
        assert round(Decimal(dollars.get(who, 0.0)), 2) == round(expected, 2), who
        assert abs(Decimal(dollars.get(who, 0.0)) - expected) < Decimal("1e-9"), who
    total = sum(Decimal(str(row["cost_usd"])) for row in priced)
    assert round(Decimal(_value(families, "llmtap_cost_usd")), 2) == round(total, 2)


def _finish_errors_and_latency_equal_the_store(running: Running, families: Families) -> None:
    finishes = _sql(running, "SELECT coalesce(finish_reason, 'unknown'), count(*) FROM exchanges GROUP BY 1")
    assert _by(families, "llmtap_requests", "llmtap_requests_total", "finish_reason") == {
        (reason,): float(n) for reason, n in finishes
    }
    [(decode_errors,)] = _sql(running, "SELECT count(*) FROM exchanges WHERE decode_error IS NOT NULL")
    assert _value(families, "llmtap_decode_errors") == decode_errors
    for family, column in (
        ("llmtap_request_duration_seconds", "duration_ms"),
        ("llmtap_time_to_first_token_seconds", "ttft_ms"),
    ):
        [(timed, seconds)] = _sql(running, f"SELECT count({column}), sum({column}) / 1000 FROM exchanges")
        assert timed > 0, column
        assert sum(_by(families, family, f"{family}_count").values()) == timed
        assert sum(_by(families, family, f"{family}_sum").values()) == pytest.approx(seconds)


def _cache_equals_the_store_and_tools_their_report(running: Running, families: Families) -> None:
    stored = _sql(running, "SELECT cache_verdict, cache_cause, cache_missed_tokens FROM exchanges")
    causes = Counter(cause for verdict, cause, _ in stored if verdict == "miss")
    assert causes, "sending each request twice makes misses"
    assert _by(families, "llmtap_cache_misses", "llmtap_cache_misses_total", "cause") == {
        (cause,): float(n) for cause, n in causes.items()
    }
    missed: Counter[str] = Counter()
    for verdict, cause, tokens in stored:
        if verdict == "miss" and tokens:
            missed[cause] += tokens
    assert _by(families, "llmtap_cache_missed_tokens", "llmtap_cache_missed_tokens_total", "cause") == {
        (cause,): float(n) for cause, n in missed.items()
    }
    not_cacheable = sum(1 for verdict, _, _ in stored if verdict == "not_cacheable")
    assert _value(families, "llmtap_cache_not_cacheable") == not_cacheable

    problems = Counter(row["status"] for row in _report(running, "tools", "--list") if row["status"] in STATUSES)
    assert problems == Counter({"unknown_tool": 1, "schema_violation": 1})
    assert _by(families, "llmtap_tool_problems", "llmtap_tool_problems_total", "status") == {
        (status,): float(n) for status, n in problems.items()
    }


def _writer_child(proxy_pid: int) -> int:
    """The pid of the proxy's writer process (Linux: /proc)."""
    for task in Path(f"/proc/{proxy_pid}/task").iterdir():
        for pid in (task / "children").read_text().split():
            if b"llmtap.storage.writer_process" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return int(pid)
    raise AssertionError("the proxy has no writer process")


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="finds the writer process through /proc")
def test_counters_survive_a_writer_process_restart(running: Running) -> None:
    before = running.settle()
    stored = _count(running)
    os.kill(_writer_child(running.proc.pid), signal.SIGKILL)
    case = next(c for c in load_cases() if c.id == "a_anth_json_text_max_tokens")
    token = running.routes.add(harness.json_reply(case))
    for _ in range(20):
        assert running.send(case, token, team="after-restart") == 200
    deadline = time.monotonic() + 60
    while _count(running) < stored + 20 and time.monotonic() < deadline:
        time.sleep(0.2)
    after = running.settle()
    assert _count(running) == stored + 20
    assert _value(after, "llmtap_writer_restarts") == _value(before, "llmtap_writer_restarts") + 1
    assert _value(after, "llmtap_requests") == _value(before, "llmtap_requests") + 20
    assert _by(after, "llmtap_requests", "llmtap_requests_total", "team")[("after-restart",)] == 20
    for kind in ("input", "output"):
        grown = sum(v for k, v in _by(after, "llmtap_tokens", "llmtap_tokens_total", "kind").items() if k == (kind,))
        was = sum(v for k, v in _by(before, "llmtap_tokens", "llmtap_tokens_total", "kind").items() if k == (kind,))
        assert grown > was, kind


def test_no_label_value_is_longer_than_128_characters(running: Running) -> None:
    """200 error rows that echo a 5,000-character requested model, from teams named with
    3,000 characters: the scrape's labels stay within 128 characters (SPEC §6), long
    names that differ only at their end stay apart, and the scrape stays small."""
    if running.url.startswith("postgresql"):
        pytest.skip("the labels' bound does not depend on the store (run once, on SQLite)")
    case = next(c for c in load_cases() if c.id == "a_oai_json_text_basic")
    before = _count(running)
    scraped_before = _scrape_size(running)
    request = json.loads(case.request or b"{}")
    for n in range(LONG_NAMES):
        body = json.dumps(request | {"model": "m" * 4_995 + f"{n:05d}"}).encode()
        # no reply registered for this token: the upstream answers 404, an error row
        assert running.send(case, "no-such-case", team="t" * 2_995 + f"{n % 10:05d}", body=body) == 404
    families = running.settle()
    assert _count(running) - before == LONG_NAMES

    values = {value for samples in families.values() for s in samples for value in s.labels.values()}
    assert max(len(value) for value in values) <= 128
    long_models = {value for value in values if value.startswith("m" * 100)}
    assert long_models, "the long models are counted under labels of their own, cut short"
    assert all(len(value) == 128 for value in long_models)
    # every long model is its own series until the unpriced cap, or `other`
    counted = _by(families, "llmtap_requests", "llmtap_requests_total", "model")
    assert sum(v for (model,), v in counted.items() if model in long_models) == len(long_models)
    assert _scrape_size(running) - scraped_before < 2_000_000


def _scrape_size(running: Running) -> int:
    return len(_get(running.ports["metrics"], "/metrics", SCRAPE)[2])


FOREIGN = ("attacker.example:{port}", "127.0.0.1.nip.io:{port}", "127.0.0.1:1", "localhost.:{port}", "", None)


def test_the_endpoint_answers_only_its_own_name_and_the_token(running: Running) -> None:
    """SPEC §6, the dashboard server's rules: a page that rebinds its DNS name to
    127.0.0.1 gets a 421, and since the store is private to its user (0600), a scrape
    without the token gets a 401, even on loopback: another local user reads nothing."""
    port = running.ports["metrics"]
    status, headers, body = _get(port, "/metrics", {})
    assert status == 401 and b"llmtap_" not in body and "Bearer" in headers.get("WWW-Authenticate", "")
    for wrong in ({"Authorization": "Bearer wrong"}, {"Cookie": "llmtap_token=wrong"}):
        assert _get(port, "/metrics", wrong)[0] == 401
    assert _get(port, "/metrics?token=wrong", {})[0] == 401
    for host in FOREIGN:
        forged = None if host is None else host.format(port=port)
        status, _, body = _get(port, "/metrics", SCRAPE, forged)
        assert status == 421 and b"llmtap_" not in body, forged
    for host in (f"127.0.0.1:{port}", f"localhost:{port}"):
        assert _get(port, "/metrics", SCRAPE, host)[0] == 200, host
    status, _, body = _get(port, f"/metrics?token={TOKEN}", {})  # Prometheus' `params`
    assert status == 200 and b"llmtap_writer_queue_records" in body
    log = (running.root / "proxy.log").read_text(errors="replace")
    assert f"metrics at http://127.0.0.1:{port}/metrics" in log and TOKEN not in log


def test_metrics_beyond_loopback_warn_and_ask_for_a_token(tmp_path: Path) -> None:
    """`--metrics 0.0.0.0:PORT` without a token of the user's: a warning, a token made
    and printed, and a scrape without it refused (tried through 127.0.0.1 only)."""
    port, listener = free_port(), free_port()
    args = [
        str(harness.LLMTAP), "proxy", "--quiet", "--db", f"sqlite:///{tmp_path / 'llmtap.db'}",
        "--confdir", str(tmp_path / "mitmproxy"), "--no-regular",
        "--reverse", f"openai={listener}", "--upstream", "openai=http://127.0.0.1:9",
        "--metrics", f"0.0.0.0:{port}",
    ]  # fmt: skip
    log = tmp_path / "proxy.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            args, env=harness.clean_env(LLMTAP_HOME=str(tmp_path / "home")), stdout=subprocess.DEVNULL, stderr=out
        )
    try:
        for each in (port, listener):
            harness.wait_for_port(each, proc, log)
        text = log.read_text(errors="replace")
        assert "WARNING: metrics on 0.0.0.0:" in text and "beyond this machine" in text, text
        token = re.search(r"/metrics\?token=(\S+)", text)
        assert token, text
        assert _get(port, "/metrics", {})[0] == 401
        assert _get(port, "/metrics", {"Authorization": f"Bearer {unquote(token.group(1))}"})[0] == 200
        # off loopback any IP literal may name it, never a DNS name that is not the machine's
        assert (
            _get(port, "/metrics", {"Authorization": f"Bearer {unquote(token.group(1))}"}, "attacker.example")[0] == 421
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0, log.read_text(errors="replace")[-3000:]


@pytest.mark.timeout(600)  # 10,000 requests over 8 kept-alive connections
def test_ten_thousand_team_names_leave_the_series_bounded(running: Running) -> None:
    case = next(c for c in load_cases() if c.id == "a_oai_json_text_basic")
    token = running.routes.add(harness.json_reply(case))
    if running.url.startswith("postgresql"):
        pytest.skip("the labels' bound does not depend on the store (run once, on SQLite)")
    before = _count(running)

    teams = [f"hostile-{n:05d}" for n in range(HOSTILE_TEAMS)]
    with ThreadPoolExecutor(8) as pool:
        sent = pool.map(lambda part: running.send_many(case, token, part), [teams[i::8] for i in range(8)])
        assert {status for statuses in sent for status in statuses} == {200}
    families = running.settle(timeout=120)
    assert _count(running) - before == HOSTILE_TEAMS

    teams = {s.labels["team"] for samples in families.values() for s in samples if "team" in s.labels}
    assert len(teams) <= 200 + 1  # the cap, and `other`
    assert "other" in teams
    series = sum(len(samples) for samples in families.values())
    assert series < 5_000, series
    hostile = _by(families, "llmtap_requests", "llmtap_requests_total", "team")
    # every request counted: under its own team until the cap, then under `other`
    counted = sum(v for (team,), v in hostile.items() if team.startswith("hostile-") or team == "other")
    assert counted == HOSTILE_TEAMS
