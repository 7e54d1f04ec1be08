"""`llmtap import`, `export`, `prune` and `reprocess` against real databases: a HAR made
from the corpus lands with exactly the per-team sums `make_har` expects, twice
imported is once stored, broken input is skipped or refused in one line, mitmproxy flow
files import like HAR, exports round-trip, prune collects unused bodies, and reprocess
restores what the stored raw bodies say."""

from __future__ import annotations

import copy
import csv
import gzip
import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import case, delete, func, select, update

from llmtap.storage import bodies as blobs
from llmtap.storage import schema
from llmtap.storage.maintenance import load_blob
from llmtap.storage.migrate import upgrade
from llmtap.storage.rows import PRICE_COLUMNS
from llmtap.storage.writer import Writer
from llmtap.workloads.corpus import case_meta
from tests.corpus_tools import make_har
from tests.helpers import llmtap
from tests.storage.helpers import count, exchange_ids, make_record

pytestmark = pytest.mark.timeout(120)

USAGE = {
    "input_tokens": schema.exchanges.c.usage_input_tokens,
    "cache_read_tokens": schema.exchanges.c.usage_cache_read_input_tokens,
    "cache_write_tokens": schema.exchanges.c.usage_cache_creation_input_tokens,
    "output_tokens": schema.exchanges.c.usage_output_tokens,
    "reasoning_tokens": schema.exchanges.c.usage_reasoning_output_tokens,
}


def team_sums(engine) -> dict:
    """Per-team sums straight from the `exchanges` table."""
    x = schema.exchanges.c
    columns = [func.coalesce(func.sum(column), 0).label(name) for name, column in USAGE.items()]
    query = select(
        x.team,
        func.count().label("requests"),
        func.sum(case((x.usage_input_tokens.is_(None), 1), else_=0)).label("usage_missing"),
        *columns,
    ).group_by(x.team)
    with engine.connect() as connection:
        return {
            row.team: {k: int(v) for k, v in row._mapping.items() if k != "team"} for row in connection.execute(query)
        }


@pytest.fixture
def har(tmp_path, corpus_dir) -> tuple[Path, dict]:
    path = tmp_path / "corpus.har"
    return path, make_har(corpus_dir, path)


# -- HAR ------------------------------------------------------------------------------------


def test_har_import_gives_the_expected_team_sums_and_is_idempotent(db_url, engines, har):
    path, expected = har
    first = llmtap("import", str(path), "--db", db_url, process=True)
    assert first.code == 0, first.err
    engine = engines(db_url)
    assert team_sums(engine) == expected
    entries = sum(team["requests"] for team in expected.values())
    assert f"imported {entries} LLM exchanges (0 already stored)" in first.out
    before = sorted(exchange_ids(engine))

    again = llmtap("import", str(path), "--db", db_url, process=True)
    assert again.code == 0, again.err
    assert f"({entries} already stored)" in again.out
    assert sorted(exchange_ids(engine)) == before
    assert team_sums(engine) == expected


def broken_entries(good: dict) -> tuple[list, int]:
    """HAR entries with parts missing or malformed, and how many cannot be read at all."""
    entries = []

    def variant(change) -> None:
        entry = copy.deepcopy(good)
        change(entry)
        entries.append(entry)

    variant(lambda e: e.pop("response"))  # no response: recorded, with its decode error
    variant(lambda e: e["request"].pop("postData"))  # no request body: decoded from the response
    variant(lambda e: e["request"].update(headers={"x-api-key": "sk-ant-api03-" + "z" * 30}))
    variant(lambda e: e["response"].update(headers="application/json", content={"text": 5}))
    unreadable = [
        lambda e: e.update(startedDateTime="yesterday-ish"),
        lambda e: e["request"].pop("url"),
        lambda e: e["request"].update(url=42),
        lambda e: e.update(timings={"wait": "soon"}),
    ]
    for change in unreadable:
        variant(change)
    entries += ["not an entry", None, []]
    return entries, len(unreadable) + 3


def test_har_with_missing_fields_skips_entries_and_never_crashes(tmp_path, engines, har):
    path, _ = har
    data = json.loads(path.read_text())
    good = data["log"]["entries"]
    broken, unreadable = broken_entries(good[1])
    data["log"]["entries"] = broken + good[2:6]
    path.write_text(json.dumps(data))
    url = f"sqlite:///{tmp_path / 'broken.db'}"
    result = llmtap("import", str(path), "--db", url, process=True)
    assert result.code == 0, result.err
    assert "Traceback" not in result.err
    skipped_lines = [line for line in result.err.splitlines() if line.startswith("skipped ")]
    assert len(skipped_lines) == unreadable
    assert f"and {unreadable} unreadable entries" in result.out
    stored = count(engines(url))
    assert 4 <= stored <= len(data["log"]["entries"]) - unreadable  # the good ones, and the readable broken ones


NOT_HAR = {
    "text": b"hello, this is not a HAR file\n",
    "json-object": b'{"log": {"entries": "nope"}}',
    "json-array": b"[1, 2, 3]",
    "empty": b"",
    "binary": bytes(range(256)) * 4,
    "tnetstring-like": b"12:abc",
    "deep-json": b"[" * 100_000,
}


@pytest.mark.parametrize("kind", NOT_HAR)
def test_a_file_that_is_neither_har_nor_flows_is_one_line_on_stderr(kind, tmp_path):
    path = tmp_path / f"{kind}.har"
    path.write_bytes(NOT_HAR[kind])
    result = llmtap("import", str(path), "--db", f"sqlite:///{tmp_path / 'none.db'}")
    assert result.code != 0
    assert len(result.err.strip().splitlines()) == 1, result.err
    assert result.err.startswith("llmtap: error: ")


def test_not_a_har_from_the_real_command(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("meeting notes\n")
    result = llmtap("import", str(path), "--db", f"sqlite:///{tmp_path / 'none.db'}", process=True)
    assert result.code != 0
    assert len(result.err.strip().splitlines()) == 1, result.err
    missing = llmtap("import", str(tmp_path / "missing.har"), "--db", f"sqlite:///{tmp_path / 'none.db'}", process=True)
    assert missing.code != 0 and len(missing.err.strip().splitlines()) == 1


# -- mitmproxy flow files --------------------------------------------------------------------

FLOW_CASES = {  # case → how its response travels
    "a_anth_stream_text_basic": "gzip",
    "a_oai_json_tool_call_single": "gzip",
    "b_gem_text_sse": None,
    "b_oai_fc_sse": "gzip",
}


def write_flows(corpus: Path, out: Path) -> None:
    from mitmproxy import http
    from mitmproxy.io import FlowWriter
    from mitmproxy.test import tflow, tutils

    with open(out, "wb") as handle:
        writer = FlowWriter(handle)
        for index, (name, encoding) in enumerate(FLOW_CASES.items()):
            case = corpus / name
            meta = case_meta(case)
            body = (case / "response.body").read_bytes()
            start = 1_793_000_000 + index * 60
            request = tutils.treq(
                host=meta["host"],
                port=443,
                scheme=b"https",
                method=b"POST",
                path=meta["path"].encode(),
                headers=http.Headers(
                    [(b"content-type", b"application/json"), (b"x-llmtap-team", f"flows-{index % 2}".encode())]
                ),
                content=(case / "request.json").read_bytes(),
                timestamp_start=start,
                timestamp_end=start + 0.01,
            )
            headers = [(b"content-type", (meta.get("content_type") or "application/json").encode())]
            if encoding:
                headers.append((b"content-encoding", encoding.encode()))
            response = tutils.tresp(
                status_code=meta["status"],
                headers=http.Headers(headers),
                content=b"",
                timestamp_start=start + 0.3,
                timestamp_end=start + 0.9,
            )
            response.raw_content = gzip.compress(body) if encoding == "gzip" else body
            writer.add(tflow.tflow(req=request, resp=response))
        other = tutils.treq(host="api.openai.com", port=443, scheme=b"https", method=b"GET", path=b"/v1/models")
        writer.add(tflow.tflow(req=other, resp=tutils.tresp()))


def test_mitmproxy_flow_file_imports_like_the_corpus_says(db_url, engines, corpus_dir, tmp_path):
    path = tmp_path / "traffic.mitm"
    write_flows(corpus_dir, path)
    result = llmtap("import", str(path), "--db", db_url, process=True)
    assert result.code == 0, result.err
    assert f"imported {len(FLOW_CASES)} LLM exchanges" in result.out
    assert "skipped 1 other requests" in result.out
    engine = engines(db_url)
    with engine.connect() as connection:
        rows = connection.execute(select(schema.exchanges).order_by(schema.exchanges.c.started_at)).mappings().all()
    assert len(rows) == len(FLOW_CASES)
    for index, (name, row) in enumerate(zip(FLOW_CASES, rows, strict=True)):
        expect = case_meta(corpus_dir / name)["expect"]
        assert row["decode_error"] is None, (name, row["decode_error"])
        assert row["model"] == expect["model"], name
        assert row["finish_reason"] == expect["finish_reason"], name
        assert row["text"] == expect["text"], name
        assert row["tool_call_count"] == len(expect["tool_calls"]), name
        assert row["team"] == f"flows-{index % 2}"
        usage = expect["usage"]
        assert row["usage_input_tokens"] == usage["input_tokens"], name
        assert row["usage_output_tokens"] == usage["output_tokens"], name
        assert row["usage_cache_read_input_tokens"] == usage["cache_read_tokens"], name
        assert round(row["ttfb_ms"]) == 300 and round(row["duration_ms"]) == 900


# -- export ---------------------------------------------------------------------------------


def test_export_round_trips_jsonl_csv_and_parquet(db_url, engines, har, tmp_path):
    import duckdb

    path, expected = har
    assert llmtap("import", str(path), "--db", db_url, process=True).code == 0
    engine = engines(db_url)
    ids = sorted(exchange_ids(engine))
    for fmt in ("jsonl", "csv", "parquet"):
        target = tmp_path / f"all.{fmt}"
        result = llmtap("export", "--format", fmt, "-o", str(target), "--db", db_url)
        assert result.code == 0, result.err
        if fmt == "jsonl":
            rows = [json.loads(line) for line in target.read_text().splitlines()]
            assert sum(row["usage"]["input_tokens"] for row in rows if row["usage"]) == sum(
                team["input_tokens"] for team in expected.values()
            )
        elif fmt == "csv":
            rows = list(csv.DictReader(io.StringIO(target.read_text())))
        else:
            connection = duckdb.connect()
            try:
                rows = [
                    {"id": row[0]}
                    for row in connection.execute("SELECT id FROM read_parquet(?)", [str(target)]).fetchall()
                ]
            finally:
                connection.close()
        assert sorted(row["id"] for row in rows) == ids, fmt

    window = llmtap("export", "--since", "2026-11-02T10:00", "--until", "2026-11-02T12:00", "--db", db_url)
    assert window.code == 0, window.err
    since, until = datetime(2026, 11, 2, 10, tzinfo=UTC), datetime(2026, 11, 2, 12, tzinfo=UTC)
    entries = json.loads(path.read_text())["log"]["entries"]
    inside = [
        e for e in entries if since <= datetime.fromisoformat(e["startedDateTime"].replace("Z", "+00:00")) < until
    ]
    assert 0 < len(inside) < len(entries)
    assert len(window.out.splitlines()) == len(inside)


# -- prune ----------------------------------------------------------------------------------


def conversation_record(index: int, started_at: datetime, shared: str, own: str):
    record = make_record(index, started_at=started_at)
    body = {
        "model": "claude-test",
        "system": "shared system prompt",
        "messages": [
            {"role": "user", "content": shared},
            {"role": "user", "content": own},
        ],
    }
    record.request_body = json.dumps(body).encode()
    record.response_body = json.dumps({"id": f"msg_{index}", "content": [{"text": own}]}).encode()
    return record


def test_prune_deletes_old_exchanges_and_collects_unused_bodies(store, db_url, spool_dir):
    now = datetime.now(UTC)
    writer = Writer(store, spool_dir=spool_dir, body_mode="full", max_delay=0.01)
    old = [
        conversation_record(i, now - timedelta(days=40, minutes=i), "kept: both ages share it", f"old {i}")
        for i in range(6)
    ]
    new = [
        conversation_record(100 + i, now - timedelta(hours=1, minutes=i), "kept: both ages share it", f"new {i}")
        for i in range(4)
    ]
    for record in old + new:
        writer.submit(record)
    assert writer.close()
    bodies_before = count(store, schema.bodies)

    result = llmtap("prune", "--older-than", "30d", "--db", db_url, process=True)
    assert result.code == 0, result.err
    assert result.out.startswith("pruned 6 exchanges")
    assert sorted(exchange_ids(store)) == sorted(r.id for r in new)
    with store.connect() as connection:
        referenced = set(connection.execute(select(schema.body_refs.c.body_hash)).scalars())
        stored = set(connection.execute(select(schema.bodies.c.hash)).scalars())
        calls = set(connection.execute(select(schema.tool_calls.c.exchange_id)).scalars())
        refs_of = set(connection.execute(select(schema.body_refs.c.exchange_id)).scalars())
        assert stored == referenced  # nothing unused, nothing missing
        assert calls <= {r.id for r in new} and refs_of == {r.id for r in new}
        for record in new:  # what is left still rebuilds
            ref = connection.execute(
                select(schema.exchanges.c.request_body_ref).where(schema.exchanges.c.id == record.id)
            ).scalar_one()
            rebuilt, _ = blobs.join_request(load_blob(connection, ref), lambda h: load_blob(connection, h))
            assert json.loads(rebuilt) == json.loads(record.request_body)
    # each old exchange had its own manifest, message and response; the shared ones stay
    assert bodies_before - len(stored) == 6 * 3
    assert f"and {6 * 3} unused bodies" in result.out


# -- reprocess ------------------------------------------------------------------------------


def test_reprocess_restores_records_from_full_bodies(db_url, engines, har):
    path, expected = har
    assert llmtap("import", str(path), "--bodies", "full", "--db", db_url, process=True).code == 0
    engine = engines(db_url)
    x = schema.exchanges.c
    with engine.connect() as connection:
        before = {row["id"]: dict(row) for row in connection.execute(select(schema.exchanges)).mappings()}
        calls_before = sorted(tuple(row) for row in connection.execute(select(schema.tool_calls)))
    with engine.begin() as connection:
        connection.execute(
            update(schema.exchanges).values(
                finish_reason="garbage", finish_reason_raw="garbage", usage_input_tokens=-1, text="garbage", model="x"
            )
        )
        connection.execute(delete(schema.tool_calls))
    assert team_sums(engine) != expected

    result = llmtap("reprocess", "--db", db_url, process=True)
    assert result.code == 0, result.err
    assert result.out.startswith(f"reprocessed {len(before)} exchanges ({len(before)} changed)")
    with engine.connect() as connection:
        after = {row["id"]: dict(row) for row in connection.execute(select(schema.exchanges)).mappings()}
        calls_after = sorted(tuple(row) for row in connection.execute(select(schema.tool_calls)))
    assert team_sums(engine) == expected
    # Prices are left for the next report to recompute (a re-decode may change usage).
    differences = {
        (exchange_id, column): (value, after[exchange_id][column])
        for exchange_id, row in before.items()
        for column, value in row.items()
        if after[exchange_id][column] != value and column not in PRICE_COLUMNS
    }
    assert differences == {}
    assert calls_after == calls_before
    assert all(row[x.finish_reason.name] != "garbage" for row in after.values())


def test_commands_refuse_a_store_from_a_newer_llmtap_in_one_line(tmp_path, engines):
    from sqlalchemy import text

    url = f"sqlite:///{tmp_path / 'newer.db'}"
    engine = engines(url)
    upgrade(engine)
    with engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = 'f00dfacecafe'"))
    result = llmtap("export", "--db", url, process=True)
    assert result.code != 0
    assert len(result.err.strip().splitlines()) == 1, result.err
