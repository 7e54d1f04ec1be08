"""The proxy's access line and its last line (issue 26), from the rows and stats the writer
has: every field of a line, what a row does not know, a team that would break the line,
and the counts of a run. (End to end: tests/e2e/test_upstream_down.py.)"""

from __future__ import annotations

import io
from datetime import UTC, datetime
from pathlib import Path

import pytest

from llmtap.storage import access_log, left_behind
from llmtap.storage.writer import WriterStats

ROW = {
    "started_at": datetime(2026, 12, 2, 5, 59, 1, 123000, tzinfo=UTC),
    "team": "search",
    "method": "POST",
    "host": "api.anthropic.com",
    "path": "/v1/messages",
    "status": 200,
    "model": "claude-sonnet-4-5",
    "usage_input_tokens": 1234,
    "usage_output_tokens": 56,
    "price_status": "priced",
    "cost_total_pico": 4_512_000_000,
    "duration_ms": 1234.4,
}


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {},
            "llmtap: 2026-12-02T05:59:01.123Z team=search POST api.anthropic.com/v1/messages 200 "
            "model=claude-sonnet-4-5 tokens=1,234/56 cost=$0.004512 1,234 ms",
        ),
        (
            {
                "price_status": "unpriced",
                "cost_total_pico": None,
                "usage_input_tokens": None,
                "usage_output_tokens": None,
            },
            "llmtap: 2026-12-02T05:59:01.123Z team=search POST api.anthropic.com/v1/messages 200 "
            "model=claude-sonnet-4-5 tokens=- cost=unpriced 1,234 ms",
        ),
        (
            {
                "team": "a\x1b]0;pwned\x07 b",
                "model": None,
                "model_requested": "m\nx",
                "status": None,
                "duration_ms": None,
            },
            'llmtap: 2026-12-02T05:59:01.123Z team="a\\x1b]0;pwned\\x07 b" POST api.anthropic.com/v1/messages - '
            "model=m\\x0ax tokens=1,234/56 cost=$0.004512 - ms",
        ),
        (
            {"started_at": datetime(2026, 12, 2, 5, 59, 1), "cost_total_pico": 0, "team": 'say "hi"'},
            'llmtap: 2026-12-02T05:59:01.000Z team="say \\"hi\\"" POST api.anthropic.com/v1/messages 200 '
            "model=claude-sonnet-4-5 tokens=1,234/56 cost=$0 1,234 ms",
        ),
    ],
    ids=["priced", "unpriced", "controls", "quotes"],
)
def test_an_access_line(change: dict[str, object], expected: str) -> None:
    assert access_log.line({**ROW, **change}) == expected


def test_a_batch_is_one_write_of_one_line_each() -> None:
    out = io.StringIO()
    access_log.write([ROW, {**ROW, "team": "other"}], out)
    assert [line.split()[2] for line in out.getvalue().splitlines()] == ["team=search", "team=other"]


def test_the_last_line_counts(tmp_path: Path) -> None:
    quiet = WriterStats(written=10, replayed=2)
    assert left_behind.line(quiet, tmp_path) == (
        f"llmtap: stopped: 12 records written to the store this run, 0 in the spool at {tmp_path}, 0 rejected"
    )
    busy = WriterStats(written=1, in_spool=1234, rejected=1, lost=2, skipped=5)
    assert left_behind.line(busy, tmp_path, not_handed=1) == (
        f"llmtap: stopped: 1 record written to the store this run, 1,234 in the spool at {tmp_path} "
        f"(written when the database is back), 1 rejected (kept in {tmp_path / 'rejected.jsonl'}, "
        "which `llmtap import` takes back), 5 left out (not LLM generations), 3 lost"
    )


def test_a_writer_counts_what_it_leaves_and_leaves_the_saying_to_the_proxy(tmp_path, engines, caplog) -> None:
    """The counts the last line is made of, as the writer closes with the store away: all
    in the spool, none written; with `say_left=False` the writer's own line is not said
    (the proxy's last line says it); the access lines come as records are built, spooled
    or not."""
    from llmtap.storage.migrate import upgrade
    from llmtap.storage.writer import Writer
    from tests.storage.helpers import make_record, sqlite_exclusive

    url = f"sqlite:///{tmp_path / 'store.db'}"
    engine = engines(url)
    upgrade(engine)
    seen: list[dict[str, object]] = []
    writer = Writer(
        engine, spool_dir=tmp_path / "spool", batch_size=50, max_delay=0.02, retry_initial=0.05, retry_max=0.2,
        say_left=False, access=seen.extend,
    )  # fmt: skip
    with sqlite_exclusive(url):
        for index in range(5):
            writer.submit(make_record(index))
        assert writer.close()
    assert (writer.stats.written, writer.stats.in_spool, writer.stats.rejected, writer.stats.lost) == (0, 5, 0, 0)
    assert "still in the spool" not in caplog.text
    assert len(seen) == 5
