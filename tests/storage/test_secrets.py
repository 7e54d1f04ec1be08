"""API keys never reach the store, the spool, an export or a log (SPEC §4): canary keys
in every place a key travels (x-api-key, Authorization: Bearer, x-goog-api-key, `?key=`,
a request body's messages, metadata, stop sequences and tool schemas, a response's text
and tool-call arguments) go in through `llmtap import` and through a spooling writer
with body mode `full`; then every table, every spool file, every export and all output
are searched. Only the keyed fingerprint and the last four characters remain."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import stat
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, MetaData, select
from sqlalchemy.engine import make_url

from llmtap.storage import bodies as blobs
from llmtap.storage import schema, spool
from llmtap.storage.ingest import HttpExchange, to_record
from llmtap.storage.secrets import KeyFingerprinter
from llmtap.storage.writer import Writer
from tests.corpus_tools import make_har
from tests.helpers import free_port, llmtap
from tests.storage.helpers import (
    T0,
    corpus_http,
    count,
    make_record,
    spool_files,
    sqlite_exclusive,
)

pytestmark = pytest.mark.timeout(120)

MARK = "CANARY"  # in every planted key, never in its last four characters
KEYS = {
    "anthropic": "sk-ant-api03-CANARYhdr" + "a" * 40 + "Wq7z",
    "openai": "sk-proj-CANARYbearer" + "b" * 40 + "Jt4k",
    "google": "AIzaSyCANARYgoog" + "c" * 20 + "Pm2x",
    "query": "AIzaSyCANARYquery" + "d" * 20 + "Lr8v",
    "body": "sk-ant-api03-CANARYbody" + "e" * 30,
    "response": "sk-proj-CANARYresponse" + "f" * 30,
}


def planted(corpus: Path, tag: str = "planted", day: int = 0) -> list[tuple[HttpExchange, str | None]]:
    """Corpus exchanges carrying the canaries, each with the key its headers or URL hold;
    their response ids end in `tag`, so they are new responses to the store."""
    out: list[tuple[HttpExchange, str | None]] = []
    gemini = corpus_http(
        corpus / "b_gem_text_json",
        path="/v1beta/models/gemini-2.5-flash:generateContent?key=" + KEYS["query"],
    )
    out.append((gemini, KEYS["query"]))
    stream = corpus_http(
        corpus / "b_gem_text_sse",
        path="/v1beta/models/gemini-2.0-flash-exp:streamGenerateContent?alt=sse&key=" + KEYS["query"],
    )
    out.append((stream, KEYS["query"]))
    out.append((corpus_http(corpus / "b_gem_fc_json", headers=[("x-goog-api-key", KEYS["google"])]), KEYS["google"]))

    anthropic = corpus_http(corpus / "a_anth_json_cache_write", headers=[("x-api-key", KEYS["anthropic"])])
    request = json.loads(anthropic.request_body or b"{}")
    request["metadata"] = {"user_id": KEYS["body"]}
    request["messages"].append({"role": "user", "content": f"my key is {KEYS['body']}, keep it safe"})
    request["stop_sequences"] = [KEYS["body"]]
    request["tools"] = [
        {
            "name": "fetch",
            "description": f"use the key {KEYS['body']}",
            "input_schema": {"type": "object", "properties": {"token": {"type": "string", "default": KEYS["body"]}}},
        }
    ]
    anthropic.request_body = json.dumps(request).encode()
    out.append((anthropic, KEYS["anthropic"]))

    chat = corpus_http(corpus / "a_oai_json_text_basic", headers=[("Authorization", "Bearer " + KEYS["openai"])])
    response = json.loads(chat.response_body or b"{}")
    response["choices"][0]["message"]["content"] = f"Your key {KEYS['response']} was found in the log."
    chat.response_body = json.dumps(response).encode()
    out.append((chat, KEYS["openai"]))

    call = corpus_http(corpus / "a_oai_json_tool_call_single", headers=[("Authorization", "Bearer " + KEYS["openai"])])
    response = json.loads(call.response_body or b"{}")
    arguments = json.dumps({"a": 2, "b": 2, "api_key": KEYS["response"]})
    response["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = arguments
    call.response_body = json.dumps(response).encode()
    out.append((call, KEYS["openai"]))
    fingerprinter = KeyFingerprinter(b"x" * 32)
    for index, (http, _) in enumerate(out):
        http.started_at = T0 + timedelta(days=day, hours=1, minutes=index)
        # a response of its own, not the make_har entry of the same case again
        record = to_record(http, fingerprinter=fingerprinter)
        assert record is not None and record.exchange.response_id
        old_id = record.exchange.response_id.encode()
        http.response_body = (http.response_body or b"").replace(old_id, old_id + b"-" + tag.encode())
    return out


def har_entry(http: HttpExchange) -> dict[str, Any]:
    url = f"https://{http.host}{http.path}"
    return {
        "startedDateTime": http.started_at.isoformat(),
        "time": 600.0,
        "request": {
            "method": "POST",
            "url": url,
            "headers": [{"name": k, "value": v} for k, v in http.request_headers],
            "postData": {"mimeType": "application/json", "text": (http.request_body or b"").decode()},
        },
        "response": {
            "status": http.status,
            "headers": [{"name": k, "value": v} for k, v in http.response_headers],
            "content": {"mimeType": "application/json", "text": (http.response_body or b"").decode()},
        },
        "timings": {"send": 1, "wait": 400, "receive": 199},
    }


def leaks(value: Any, where: str, encoding: str | None = None) -> list[str]:
    """Where a canary shows in a value (text, JSON, bytes; compressed blobs unpacked)."""
    if value is None or isinstance(value, (int, float, bool)):
        return []
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        if encoding:
            data = blobs.decompress(data, encoding)
        return leaks(data.decode("latin-1"), where)
    if isinstance(value, (dict, list, tuple)):
        return leaks(json.dumps(value, ensure_ascii=False, default=str), where)
    text = str(value)
    return [f"{where}: …{text[max(text.find(MARK) - 40, 0) : text.find(MARK) + 40]}…"] if MARK in text else []


def store_leaks(engine: Engine) -> list[str]:
    found: list[str] = []
    reflected = MetaData()
    reflected.reflect(engine)
    assert {"exchanges", "tool_calls", "bodies", "body_refs"} <= set(reflected.tables)
    with engine.connect() as connection:
        for table in reflected.tables.values():
            for row in connection.execute(select(table)).mappings():
                for column, value in row.items():
                    encoding = row["encoding"] if table.name == "bodies" and column == "data" else None
                    found += leaks(value, f"{table.name}.{column}", encoding)
    return found


def spool_leaks(folder: Path) -> list[str]:
    found: list[str] = []
    for path in sorted(folder.iterdir()) if folder.is_dir() else []:
        text = path.read_text("utf-8", "replace")
        found += leaks(text, path.name)
        for line in text.splitlines():
            rows = spool.decode(line.encode())
            for body in rows.bodies:
                found += leaks(body["data"], f"{path.name} body {body['hash'][:8]}", body["encoding"])
    return found


@pytest.fixture
def har(tmp_path: Path, corpus_dir: Path) -> Path:
    path = tmp_path / "keys.har"
    make_har(corpus_dir, path)
    data = json.loads(path.read_text())
    data["log"]["entries"] += [har_entry(http) for http, _ in planted(corpus_dir)]
    path.write_text(json.dumps(data))
    assert MARK in path.read_text()
    return path


def unreachable(url: str) -> str:
    """The same database through a port where nothing listens (connections refused)."""
    return make_url(url).set(host="127.0.0.1", port=free_port()).render_as_string(False)


def test_no_key_reaches_store_spool_exports_or_logs(
    db_url, engines, tmp_path, har, corpus_dir, llmtap_home, caplog, capfd
):
    caplog.set_level(logging.DEBUG)
    output: list[str] = []

    # 1. the command line: a HAR with keys in headers, query strings and bodies
    imported = llmtap("import", str(har), "--db", db_url, "--bodies", "full", process=True)
    output += [imported.out, imported.err]
    assert imported.code == 0, imported.err
    entries = len(json.loads(har.read_text())["log"]["entries"])
    engine = engines(db_url)
    assert count(engine) == entries

    # 2. the writer while the database is away: the rows wait in the spool
    spool_dir = tmp_path / "spool"
    fingerprinter = KeyFingerprinter.from_file(llmtap_home / "fingerprint.secret")
    records = []
    for http, _ in planted(corpus_dir, tag="spooled", day=1):
        records.append(to_record(http, fingerprinter=fingerprinter))
    if db_url.startswith("sqlite"):
        with sqlite_exclusive(db_url):
            spooled = spool_while_away(engines(db_url, busy_timeout_ms=50), spool_dir, records)
    else:
        spooled = spool_while_away(engines(unreachable(db_url)), spool_dir, records)
    assert spooled == len(records)
    assert spool_files(spool_dir)
    assert spool_leaks(spool_dir) == []
    writer = Writer(engine, spool_dir=spool_dir, body_mode="full", max_delay=30)
    assert writer.close()  # replays the spool
    assert not spool_files(spool_dir)
    assert count(engine) == entries + len(records)

    # 3. exports
    for fmt in ("jsonl", "csv"):
        target = tmp_path / f"export.{fmt}"
        exported = llmtap("export", "--format", fmt, "-o", str(target), "--db", db_url)
        output += [exported.out, exported.err]
        assert exported.code == 0, exported.err
        text = target.read_text()
        assert text.count("\n") >= entries
        assert leaks(text, target.name) == []
    stdout = llmtap("export", "--format", "jsonl", "--db", db_url)
    assert stdout.code == 0 and stdout.out.count("\n") == entries + len(records)
    output.append(stdout.out)

    # 4. the store, the logs and everything printed
    assert store_leaks(engine) == []
    captured = capfd.readouterr()
    output += [captured.out, captured.err, caplog.text]
    assert leaks("\n".join(output), "output") == []


def spool_while_away(engine: Engine, spool_dir: Path, records: list) -> int:
    writer = Writer(engine, spool_dir=spool_dir, body_mode="full", max_delay=0.01, retry_initial=5)
    for record in records:
        writer.submit(record)
    assert writer.close()
    return writer.stats.spooled


def test_fingerprint_and_last_four_are_kept(db_url, engines, tmp_path, har, corpus_dir, llmtap_home):
    imported = llmtap("import", str(har), "--db", db_url, "--bodies", "full", process=True)
    assert imported.code == 0, imported.err
    secret_file = llmtap_home / "fingerprint.secret"
    assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
    secret = secret_file.read_bytes().strip()
    engine = engines(db_url)
    with engine.connect() as connection:
        rows = connection.execute(
            select(
                schema.exchanges.c.started_at,
                schema.exchanges.c.path,
                schema.exchanges.c.key_fingerprint,
                schema.exchanges.c.key_last4,
            )
        ).all()
    by_minute = {(row.started_at.hour, row.started_at.minute): row for row in rows}
    for index, (http, key) in enumerate(planted(corpus_dir)):
        row = by_minute[(http.started_at.hour, http.started_at.minute)]
        assert key is not None
        assert row.key_fingerprint == hmac.new(secret, key.encode(), hashlib.sha256).hexdigest()[:32], index
        assert row.key_last4 == key[-4:]
        assert MARK not in (row.path or "")
        if "?" in http.path:
            assert "key=%5BREDACTED%5D" in row.path or "key=[REDACTED]" in row.path
    # make_har's own keys (one per protocol) are fingerprinted too, never kept
    assert all(row.key_fingerprint and len(row.key_last4) == 4 for row in rows)
    assert store_leaks(engine) == []


def test_the_secret_file_is_owner_only_and_stable(llmtap_home):
    path = llmtap_home / "nested" / "fingerprint.secret"
    KeyFingerprinter.from_file(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    first = KeyFingerprinter.from_file(path).fingerprint("k" * 20)
    assert KeyFingerprinter.from_file(path).fingerprint("k" * 20) == first  # the secret is kept


def test_a_record_the_writer_rejects_keeps_no_key(store, spool_dir, caplog):
    record = make_record(7, text_value=f"the key is {KEYS['response']}")
    record.first_byte_at = "not a time"  # rows_for fails on it: the record is rejected
    writer = Writer(store, spool_dir=spool_dir, max_delay=0.01)
    writer.submit(record)
    assert writer.close()
    assert writer.stats.rejected == 1
    rejected = spool_dir / "rejected.jsonl"
    assert rejected.exists()
    assert leaks(rejected.read_text(), rejected.name) == []
    assert leaks(caplog.text, "log") == []
