"""A HAR of the next corpus (tests/corpus_tools.py `make_har` over tests/corpus_next/), as a
proxy export holds the cloud routes: AWS event-stream bodies are base64 with
`encoding: base64` and decode to the recorded bytes, each entry carries its cloud's key
header, and `llmtap import` lands every entry with its protocol, provider and the per-team
sums the cases' `expect` add up to, keeping none of the planted keys."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from sqlalchemy import create_engine, func, select

from llmtap.storage import schema
from tests.corpus_tools import CORPUS_NEXT, EVENTSTREAM, case_folders, make_har, planted_key, read_case
from tests.helpers import llmtap

USAGE = {
    "input_tokens": schema.exchanges.c.usage_input_tokens,
    "cache_read_tokens": schema.exchanges.c.usage_cache_read_input_tokens,
    "cache_write_tokens": schema.exchanges.c.usage_cache_creation_input_tokens,
    "output_tokens": schema.exchanges.c.usage_output_tokens,
    "reasoning_tokens": schema.exchanges.c.usage_reasoning_output_tokens,
}


def test_the_har_keeps_binary_frames_as_base64(tmp_path: Path) -> None:
    har = tmp_path / "next.har"
    make_har(CORPUS_NEXT, har)
    entries = json.loads(har.read_text())["log"]["entries"]
    folders = case_folders(CORPUS_NEXT)
    assert len(entries) == len(folders)
    framed = 0
    for entry, folder in zip(entries, folders, strict=True):
        case, body, _ = read_case(folder)
        content = entry["response"]["content"]
        if case.get("framing") == EVENTSTREAM:
            framed += 1
            assert content["encoding"] == "base64", folder.name
            assert base64.b64decode(content["text"]) == body, folder.name
        else:
            assert "encoding" not in content and content["text"].encode() == body, folder.name
        header, key = planted_key(case)
        assert {"name": header, "value": key} in entry["request"]["headers"], folder.name
        assert "HARLEAKCANARY" in key
    assert framed == 3


def test_the_har_imports_with_its_team_sums_and_no_key(tmp_path: Path) -> None:
    har = tmp_path / "next.har"
    expected = make_har(CORPUS_NEXT, har)
    db_file = tmp_path / "store.db"
    result = llmtap("import", str(har), "--db", f"sqlite:///{db_file}", process=True)
    assert result.code == 0, result.err
    cases = [read_case(folder)[0] for folder in case_folders(CORPUS_NEXT)]
    assert f"imported {len(cases)} LLM exchanges" in result.out

    engine = create_engine(f"sqlite:///{db_file}")
    try:
        with engine.connect() as connection:
            x = schema.exchanges.c
            stored = connection.execute(select(x.protocol, x.provider, x.complete).order_by(x.started_at)).all()
            sums = {
                row.team: {k: int(v) for k, v in row._mapping.items() if k != "team"}
                for row in connection.execute(
                    select(
                        x.team,
                        func.count().label("requests"),
                        func.sum(x.usage_input_tokens.is_(None)).label("usage_missing"),
                        *[func.coalesce(func.sum(column), 0).label(name) for name, column in USAGE.items()],
                    ).group_by(x.team)
                )
            }
    finally:
        engine.dispose()
    assert [tuple(row) for row in stored] == [(case["protocol"], case["provider"], True) for case in cases]
    assert sums == expected
    files = list(tmp_path.glob("store.db*"))  # the database and any journal beside it
    assert db_file in files
    for path in files:
        assert b"HARLEAKCANARY" not in path.read_bytes(), path.name
