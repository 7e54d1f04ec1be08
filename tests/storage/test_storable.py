"""No value a client or an upstream chooses makes a record unstorable, on either database
(issue 24): a model name over 255 characters, long error types, tool names and ids, a
request path with undecodable bytes, token counts past 64 bits. Through `llmtap import`,
the real command, on SQLite and PostgreSQL (a path's undecodable bytes: through the real
proxy, tests/e2e/test_recorded_trust.py -k odd_paths); and `import` says what the store took, how
many rows the database refused and where they are kept, not what it handed over.

Not responsible for what the columns mean (tests/storage/test_import.py) or for keys in
the values (tests/storage/test_secrets.py).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Integer, String, Text, select, text
from sqlalchemy.types import TypeDecorator

from llmtap.storage import schema
from llmtap.storage.storable import CUT, StoredInteger, StoredString, StoredText, fit
from tests.helpers import llmtap
from tests.storage.helpers import count

pytestmark = pytest.mark.timeout(120)

LONG_MODEL = "claude-" + "m" * 300
REFUSED = "claude-refused-by-the-dba"  # a model the test's own constraint makes the database refuse


def entry(n: int, model: str, **parts: Any) -> dict[str, Any]:
    """A HAR entry of one Anthropic Messages exchange; `parts` change the request's
    `max_tokens`, the answer's stop reason, tool call and usage, the error, the URL."""
    request = {
        "model": model,
        "max_tokens": parts.get("max_tokens", 16),
        "messages": [{"role": "user", "content": "hi"}],
    }
    answer: dict[str, Any] = {
        "id": parts.get("response_id", f"msg_{n:08d}"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": "hello"}],
        "stop_reason": parts.get("stop_reason", "end_turn"),
        "usage": {"input_tokens": parts.get("input_tokens", 3), "output_tokens": 1},
    }
    if "tool" in parts:
        answer["content"].append({"type": "tool_use", "id": parts["tool"], "name": parts["tool"], "input": {}})
    status = 200
    if "error" in parts:
        status, answer = 400, {"type": "error", "error": {"type": parts["error"], "message": "no"}}
    return {
        "startedDateTime": f"2026-11-02T09:{n:02d}:00Z",
        "time": 10.0,
        "request": {
            "method": "POST",
            "url": parts.get("url", "https://api.anthropic.com/v1/messages"),
            "httpVersion": "HTTP/1.1",
            "headers": [{"name": "content-type", "value": "application/json"}],
            "postData": {"mimeType": "application/json", "text": json.dumps(request)},
        },
        "response": {
            "status": status,
            "headers": [{"name": "content-type", "value": parts.get("content_type", "application/json")}],
            "content": {"mimeType": "application/json", "text": json.dumps(answer)},
        },
        "timings": {"send": 1, "wait": 5, "receive": 4},
    }


HOSTILE = [
    entry(1, LONG_MODEL),
    entry(2, "claude-sonnet-4-5", error="overloaded_" + "e" * 300),
    entry(3, "claude-sonnet-4-5", tool="toolu_" + "t" * 300, stop_reason="tool_use"),
    entry(4, "claude-sonnet-4-5", stop_reason="s" * 100, response_id="msg_" + "r" * 300),
    entry(5, "claude-sonnet-4-5", input_tokens=10**20, max_tokens=10**30),
    entry(6, "claude-sonnet-4-5", content_type="application/json; " + "x" * 300),
]


def write_har(path: Path, entries: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"log": {"version": "1.2", "entries": entries}}))  # ASCII: \udcff escaped
    return path


def imported(out: str) -> int:
    found = re.search(r"imported (\d+) LLM exchanges", out)
    assert found, out
    return int(found.group(1))


def test_no_wire_value_makes_a_record_unstorable(db_url, engines, tmp_path, llmtap_home):
    """Before: on PostgreSQL most of these were rejected (`value too long for type character
    varying(255)`, `bigint out of range`) and the output said `imported 6`; on SQLite the
    token count lost the whole batch (`OverflowError`), and the output said the same."""
    result = llmtap("import", str(write_har(tmp_path / "hostile.har", HOSTILE)), "--db", db_url, process=True)
    assert result.code == 0, result.err
    assert "rejected" not in result.out + result.err and "unexpected failure" not in result.err, result.err
    engine = engines(db_url)
    assert imported(result.out) == count(engine) == len(HOSTILE)
    assert not (llmtap_home / "spool" / "rejected.jsonl").exists()
    with engine.connect() as connection:
        rows = {r.started_at.minute: r for r in connection.execute(select(schema.exchanges))}
        (call,) = connection.execute(select(schema.tool_calls)).all()
    assert rows[1].model == LONG_MODEL[:254] + CUT and rows[1].model_requested == rows[1].model  # the same on both
    assert len(rows[2].error_type) == 128 and rows[2].error_type.startswith("overloaded_eee")
    assert len(call.name) == 255 and call.name.endswith(CUT)
    assert len(rows[4].finish_reason_raw) == 64 and len(rows[4].response_id) == 255
    assert rows[5].usage_input_tokens is None and rows[5].request_max_tokens is None  # missing, not wrong
    assert rows[5].usage_output_tokens == 1
    assert len(rows[6].response_content_type) == 128


def _refuse(engine, model: str) -> None:
    """A database that refuses a row for its content, as a constraint of a DBA's would."""
    with engine.begin() as connection:
        if engine.dialect.name == "postgresql":
            connection.execute(text(f"ALTER TABLE exchanges ADD CONSTRAINT dba_says_no CHECK (model <> '{model}')"))
        else:
            connection.execute(
                text(
                    "CREATE TRIGGER dba_says_no BEFORE INSERT ON exchanges "
                    f"WHEN NEW.model = '{model}' BEGIN SELECT RAISE(ABORT, 'the DBA says no'); END"
                )
            )


def test_import_counts_what_the_store_took_and_says_what_it_refused(db_url, engines, tmp_path, llmtap_home):
    """Before: `imported 3` with one row refused, and `imported 1` for loading the rejected
    file again when nothing was stored."""
    engine = engines(db_url)
    assert llmtap("db", "upgrade", "--db", db_url).code == 0
    _refuse(engine, REFUSED)
    har = write_har(tmp_path / "three.har", [entry(1, "claude-sonnet-4-5"), entry(2, REFUSED), entry(3, LONG_MODEL)])
    rejected = llmtap_home / "spool" / "rejected.jsonl"
    result = llmtap("import", str(har), "--db", db_url, process=True)
    assert result.code == 0, result.err
    assert imported(result.out) == count(engine) == 2
    assert f"1 rejected by the database, kept in {rejected}" in result.out
    assert rejected.exists()

    again = llmtap("import", str(rejected), "--db", db_url, process=True)
    assert again.code == 0, again.err
    assert imported(again.out) == 0 and count(engine) == 2
    assert f"1 rejected by the database, kept in {rejected}" in again.out


# -- the rule, where it lives ------------------------------------------------------------------


def test_every_string_and_integer_column_is_a_stored_type():
    """A column added with a plain String, Text or Integer would take a value the database
    refuses: each must be one of storable.py's types."""
    plain = [
        f"{table.name}.{column.name}"
        for table in schema.metadata.tables.values()
        for column in table.columns
        if isinstance(column.type, (String, Text, Integer)) and not isinstance(column.type, TypeDecorator)
    ]
    assert plain == []
    kinds = {type(c.type) for t in schema.metadata.tables.values() for c in t.columns}
    assert {StoredString, StoredText, StoredInteger} <= kinds


@pytest.mark.parametrize(
    ("value", "length", "expected"),
    [
        ("short", 10, "short"),
        ("x" * 11, 10, "x" * 9 + CUT),
        ("a\x00b", None, "a\ufffdb"),
        ("path?\udcff\udcfe", None, "path?\ufffd\ufffd"),
        ("pair 😀 \ud83d", 7, "pair 😀" + CUT),
        ("é" * 300, 255, "é" * 254 + CUT),
    ],
)
def test_fit(value: str, length: int | None, expected: str):
    assert fit(value, length) == expected
    fitted = fit(value, length)
    fitted.encode("utf-8")
    assert "\x00" not in fitted and (length is None or len(fitted) <= length)
