"""API keys never reach the store, the spool, an export or a log (SPEC §4): canary keys
in every place a key travels (x-api-key, Authorization: Bearer, x-goog-api-key, `?key=`,
a request body's messages, metadata, stop sequences and tool schemas, a response's text
and tool-call arguments) go in through `llmtap import` and through a spooling writer
with body mode `full`; then every table, every spool file, every export and all output
are searched. Only the keyed fingerprint and the last four characters remain."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import pickle
import stat
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus, unquote_plus

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, MetaData, select
from sqlalchemy.engine import make_url

from llmtap.protocols.canonical import ApiError, RequestFacts, ToolCall
from llmtap.storage import bodies as blobs
from llmtap.storage import schema, spool
from llmtap.storage.importers.har import NestingGuard, read_har
from llmtap.storage.ingest import HttpExchange, to_record
from llmtap.storage.rows import rows_for
from llmtap.storage.secrets import (
    KeyFingerprinter,
    api_key,
    redact_headers,
    redact_query,
    request_secrets,
    scrub_record,
    secret_name,
)
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


def test_fingerprint_and_last_four_are_kept(db_url, engines, har, corpus_dir, llmtap_home):
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


# -- any path a client can send (issue 13) -------------------------------------------------------

SECRET = "CANARYq7" + "Zx" * 12  # of no provider's shape: only its name says it is a key

ODD_PATHS = [
    ("//[x/v1/messages", "//[x/v1/messages"),
    (f"//[x/v1/messages?key={SECRET}", "//[x/v1/messages?key=[REDACTED]"),
    (f"/[::1/v1/messages?beta=true&key={SECRET}", "/[::1/v1/messages?beta=true&key=[REDACTED]"),
    (f"/v1/messages?%6Bey={SECRET}", "/v1/messages?%6Bey=[REDACTED]"),  # the name percent-encoded
    (f"/v1/messages?KEY={SECRET}&x=a%20b+c", "/v1/messages?KEY=[REDACTED]&x=a%20b+c"),  # the rest as sent
    (f"/v1?api_key={SECRET}&&=&key&access_token={SECRET}#f", "/v1?api_key=[REDACTED]&&=&key&access_token=[REDACTED]"),
    (f"?key={SECRET}", "?key=[REDACTED]"),
    (f"/v1?key={SECRET}#frag", "/v1?key=[REDACTED]"),  # the value runs to the next `&`
    ("/%ZZ/v1/messages?key", "/%ZZ/v1/messages?key"),
    ("", ""),
]


@pytest.mark.parametrize(("path", "redacted"), ODD_PATHS)
def test_redact_query_takes_any_path(path: str, redacted: str):
    assert redact_query(path) == redacted
    assert redact_query(redacted) == redacted


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text())
def test_redact_query_never_raises(path: str):
    once = redact_query(path)
    assert isinstance(once, str)
    assert redact_query(once) == once


_QUERY_TEXT = st.text(st.characters(blacklist_characters="&=#", blacklist_categories=("Cs",)), max_size=12)


@settings(max_examples=300, deadline=None)
@given(
    path=st.text(st.characters(blacklist_characters="?", blacklist_categories=("Cs",)), max_size=30),
    before=st.lists(st.tuples(_QUERY_TEXT, _QUERY_TEXT), max_size=4),
    after=st.lists(st.tuples(_QUERY_TEXT, _QUERY_TEXT), max_size=4),
    name=st.sampled_from(["key", "KEY", "api_key", "Api-Key", "access_token", "%6Bey", "k%65y"]),
    secret=st.text(st.characters(whitelist_categories=("Lu", "Ll", "Nd"), whitelist_characters="-_.~%#"), min_size=1),
)
def test_a_key_parameter_never_survives(
    path: str, before: list[tuple[str, str]], after: list[tuple[str, str]], name: str, secret: str
):
    marked = f"SeCrEt{secret}"
    others = [f"{n}={v}" for n, v in before] + [f"{name}={marked}"] + [f"{n}={v}" for n, v in after]
    out = redact_query(f"{path}?{'&'.join(others)}")
    assert marked not in out
    assert f"{name}=[REDACTED]" in out
    for pair in others:
        if not secret_name(unquote_plus(pair.partition("=")[0])):
            assert pair in out.split("?", 1)[1].split("&") or marked in pair


# -- the exact key values of one request (issue 13) ---------------------------------------------


def test_request_secrets_finds_every_credential_whatever_its_shape():
    basic = base64.b64encode(b"billing:proxy-pass-42").decode()
    upstream_basic = base64.b64encode(b"acct:upstream-pw-43").decode()
    literals = request_secrets(
        [
            (b"x-api-key", b"my-own-gateway-key"),
            ("Authorization", "Bearer CUSTOMTOKEN123"),
            ("x-goog-api-key", "goog-shaped-not"),
            ("api-key", "azure-key-1"),
            ("proxy-authorization", f"Basic {basic}"),
            ("x-other", "not-a-secret-header"),
        ],
        "alt=sse&key=query-key-77&api_key=x",
        proxy_auth=f"Basic {upstream_basic}",
    )
    found = set(literals.values)
    assert {"my-own-gateway-key", "CUSTOMTOKEN123", "goog-shaped-not", "azure-key-1"} <= found
    assert {"proxy-pass-42", "upstream-pw-43", "query-key-77", basic} <= found
    assert "billing" not in found and "not-a-secret-header" not in found
    assert "x" not in found  # too short to hunt in free text (see LITERAL_MIN)
    assert "CUSTOMTOKEN123" not in repr(literals) and "CUSTOMTOKEN123" not in str(literals)
    assert json.dumps({"s": literals}, default=str).count("CUSTOMTOKEN") == 0
    assert pickle.loads(pickle.dumps(literals)).values == literals.values  # to the writer process


def test_literals_replace_every_spelling():
    literals = request_secrets([("authorization", 'Bearer tok/"é+1 2')])
    (value,) = literals.values
    text = json.dumps({"a": value, "b": f"x{value}y"}) + json.dumps(value, ensure_ascii=False)
    text += " " + quote(value, safe="") + " " + quote_plus(value)
    assert literals.text(text).count("[REDACTED]") == 5
    assert value not in literals.text(text)
    assert literals.data(text.encode()) == literals.text(text).encode()
    assert literals.text("nothing here") == "nothing here"


def test_scrub_record_reaches_every_stored_part():
    key = "CUSTOMTOKEN" + "9" * 20
    record = make_record(3, text_value=f"echo {key}")
    record.exchange.error = ApiError("invalid_request_error", key, f"Incorrect API key provided: {key}")
    record.exchange.tool_calls = [ToolCall("c1", "login", {"token": key, key: 1}, json.dumps({"token": key}), True)]
    record.exchange.request = RequestFacts(params={"stop": [key]}, thinking={"note": key})
    record.exchange.decode_error = f"bad {key}"
    record.request_body = json.dumps({"messages": [{"content": key}]}).encode()
    record.response_body = key.encode()
    record.path = f"/v1/{key}/messages"
    record.team = f"team-{key}"
    record.request_headers = [("x-echo", key)]
    record.key_fingerprint = "f" * 32
    scrub_record(record, request_secrets([("authorization", f"Bearer {key}")]))
    assert key not in repr(record)
    rows = rows_for(record, "full")
    assert key not in json.dumps([rows.exchanges, rows.tool_calls], default=str)
    assert all(key.encode() not in blobs.decompress(b["data"], b["encoding"]) for b in rows.bodies)
    assert record.key_fingerprint == "f" * 32  # llmtap's own fields are left alone


def _echo_har(tmp_path: Path, corpus_dir: Path, key: str, url: str) -> Path:
    """A HAR whose request carries `key` in an Authorization header of no known shape and
    whose upstream echoed it in its error, as OpenAI's 401 does."""
    http = corpus_http(corpus_dir / "a_oai_json_cached_tokens", headers=[("authorization", f"Bearer {key}")])
    entry = har_entry(http)
    entry["request"]["url"] = url
    body = json.loads(entry["request"]["postData"]["text"])
    body["messages"].append({"role": "user", "content": f"my token is {key}"})
    entry["request"]["postData"]["text"] = json.dumps(body)
    error = {"error": {"message": f"Incorrect API key provided: {key}.", "type": "invalid_request_error"}}
    entry["response"]["status"] = 401
    entry["response"]["content"]["text"] = json.dumps(error)
    path = tmp_path / "echo.har"
    path.write_text(json.dumps({"log": {"version": "1.2", "entries": [entry]}}))
    return path


@pytest.mark.parametrize("where", ["/v1/chat/completions", "//[x/v1/chat/completions"])
def test_import_scrubs_an_echoed_key_of_no_known_shape(db_url, engines, tmp_path, corpus_dir, llmtap_home, where):
    key = "CUSTOMTOKEN-" + "k" * 24 + "Zz9q"
    har_path = _echo_har(tmp_path, corpus_dir, key, f"https://api.openai.com{where}")
    imported = llmtap("import", str(har_path), "--db", db_url, "--bodies", "full", process=True)
    assert imported.code == 0, imported.err
    assert key not in imported.out + imported.err
    engine = engines(db_url)
    with engine.connect() as connection:
        (row,) = [dict(r._mapping) for r in connection.execute(select(schema.exchanges))]
        stored = [blobs.decompress(b.data, b.encoding) for b in connection.execute(select(schema.bodies))]
    assert row["path"] == where and row["status"] == 401
    assert row["error_message"] == "Incorrect API key provided: [REDACTED]."
    assert row["key_last4"] == "Zz9q"
    assert key not in json.dumps(row, default=str)
    assert stored and all(key.encode() not in blob for blob in stored)
    assert any(b"my token is [REDACTED]" in blob for blob in stored)
    if db_url.startswith("sqlite"):
        files = b"".join(p.read_bytes() for p in tmp_path.glob("store.db*"))
        assert key.encode() not in files


def test_a_spooled_record_keeps_no_key_of_any_shape(db_url, engines, tmp_path, corpus_dir, llmtap_home):
    """The key is removed when the record is made, so the spool (the database away) and
    what it replays never hold it."""
    key = "CUSTOMTOKEN-" + "s" * 24 + "Yy8p"
    har_path = _echo_har(tmp_path, corpus_dir, key, "https://api.openai.com/v1/chat/completions")
    fingerprinter = KeyFingerprinter.from_file(llmtap_home / "fingerprint.secret")
    with open(har_path, "rb") as handle:
        found = list(read_har(NestingGuard(handle), str(har_path)))
    records = [to_record(http, fingerprinter=fingerprinter) for http, _ in found if http]
    spool_dir = tmp_path / "spool"
    if db_url.startswith("sqlite"):
        with sqlite_exclusive(db_url):
            assert spool_while_away(engines(db_url, busy_timeout_ms=50), spool_dir, records) == 1
    else:
        assert spool_while_away(engines(unreachable(db_url)), spool_dir, records) == 1
    spooled = b"".join(p.read_bytes() for p in spool_files(spool_dir))
    assert spooled and key.encode() not in spooled
    for line in spooled.splitlines():
        rows = spool.decode(line)
        assert all(key.encode() not in blobs.decompress(b["data"], b["encoding"]) for b in rows.bodies)
        assert "[REDACTED]" in rows.exchanges[0]["error_message"]


def test_a_sigv4_request_is_known_by_its_access_key_id_and_keeps_no_signature() -> None:
    """Bedrock through AWS credentials: no key travels, only the access key id that signed
    the request; it names the key (fingerprint, key map) and nothing of the signature stays."""
    authorization = (
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20261201/us-east-1/bedrock/aws4_request, "
        "SignedHeaders=host;x-amz-date, Signature=fe5f80f77d5fa3beca038a248ff027d0445342fe2855ddc963176630326f1024"
    )
    headers = [("Authorization", authorization), ("X-Amz-Security-Token", "FwoGZXIvYXdzEXAMPLE")]
    assert api_key(headers) == "AKIAIOSFODNN7EXAMPLE"
    assert api_key([("Authorization", "AWS4-HMAC-SHA256 SignedHeaders=host, Signature=ab")]) is None
    kept = dict(redact_headers(headers))
    assert "fe5f80f77d5fa3" not in str(kept) and "FwoGZXIvYXdz" not in str(kept)
    literals = request_secrets(headers)
    assert {"AKIAIOSFODNN7EXAMPLE", "FwoGZXIvYXdzEXAMPLE"} <= set(literals.values)
    assert "fe5f80f77d5fa3beca038a248ff027d0445342fe2855ddc963176630326f1024" in literals.values
    assert "host;x-amz-date" not in " ".join(v for v in literals.values if "Credential" not in v)


# -- every credential a request carries, by its name (issue 24) -----------------------------------

CREDENTIAL_NAMES = [
    "X-Amz-Security-Token", "X-Amz-Signature", "X-Amz-Credential", "cf-aig-authorization", "x-portkey-api-key",
    "helicone-auth", "x-litellm-api-key", "Ocp-Apim-Subscription-Key", "Cookie", "x-my-token", "X-Goog-Signature",
    "sig", "password", " Access_Token ", "proxy-authorization", "x-api-key", "api-key", "key",
]  # fmt: skip
NOT_CREDENTIALS = [
    "content-type", "x-claude-code-session-id", "session_id", "anthropic-version", "openai-organization",
    "X-Amz-Date", "X-Amz-SignedHeaders", "X-Amz-Algorithm", "alt", "api-version", "beta", "keep-alive", "signed",
]  # fmt: skip


@pytest.mark.parametrize("name", CREDENTIAL_NAMES)
def test_a_credential_is_known_by_its_name(name: str):
    assert secret_name(name)
    value = "CANARYv4lue" + name.strip()[:3]
    literals = request_secrets([(name, value), (name.encode(), b"CANARYbytes9")], f"{quote(name)}=q{value}")
    assert {value, "CANARYbytes9", "q" + value} <= set(literals.values)
    assert dict(redact_headers([(name, value)])) == {name: "[REDACTED]"}
    assert redact_query(f"/v1/x?a=1&{quote(name)}={value}") == f"/v1/x?a=1&{quote(name)}=[REDACTED]"


@pytest.mark.parametrize("name", NOT_CREDENTIALS)
def test_other_names_are_kept(name: str):
    assert not secret_name(name)
    assert not request_secrets([(name, "kept-value-1")], f"{name}=kept-value-2")
    assert redact_query(f"/v1?{name}=kept-value-2") == f"/v1?{name}=kept-value-2"


def test_the_parts_an_echo_may_quote_alone_are_secrets_too():
    literals = request_secrets(
        [
            ("Cookie", "theme=dark; __Secure-session=CANARYcookie1; b=CANARYcookie2"),
            ("helicone-auth", "Bearer sk-hel-9"),
        ],
        "X-Amz-Credential=AKIACANARYQ%2F20261201%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Signature=CANARYsig0",
    )
    found = set(literals.values)
    assert {"CANARYcookie1", "CANARYcookie2", "sk-hel-9", "AKIACANARYQ", "CANARYsig0"} <= found
    assert "AKIACANARYQ/20261201/us-east-1/s3/aws4_request" in found
    assert "dark" not in found and "Bearer" not in found  # too short, or no secret
    assert literals.text("the key AKIACANARYQ is unknown; cookie CANARYcookie2") == (
        "the key [REDACTED] is unknown; cookie [REDACTED]"
    )
