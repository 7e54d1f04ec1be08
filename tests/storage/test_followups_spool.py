"""Follow-ups of background work are as durable as rows (SPEC §6): while the store is away
a poll waits in the spool, a line of its own, and survives a clean shutdown; the next
writer applies it after the spooled rows (a poll never overtakes its POST, even from an
older file) and once; one the database refuses goes to the rejected file, whence
`llmtap import` takes it back; a spool file an older llmtap wrote (rows only) still
replays. SQLite, and PostgreSQL when LLMTAP_TEST_POSTGRES_URL is set."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select, text
from sqlalchemy.engine import make_url

from llmtap.analytics.pricing import Pricer
from llmtap.storage import rejected, schema, spool
from llmtap.storage.followups import FollowUp
from llmtap.storage.ingest import to_follow_up, to_record
from llmtap.storage.maintenance import load_blob
from llmtap.storage.migrate import upgrade
from llmtap.storage.record import Recorded
from llmtap.storage.rows import RowSet, rows_for
from llmtap.storage.secrets import KeyFingerprinter
from llmtap.storage.writer import Writer
from llmtap.storage.writer_process import WriterProcess, WriterSpec
from tests.helpers import llmtap
from tests.storage.helpers import (
    Forwarder,
    LockInThread,
    make_record,
    record_id,
    spool_files,
    sqlite_exclusive,
    wait_until,
)
from tests.storage.test_followups import CREATE, KEY, MODEL, USAGE, answer, http, response

pytestmark = pytest.mark.timeout(120)

FAST = {"retry_initial": 0.05, "retry_max": 0.2}


class Store:
    """The test's database, and a way to take it away: a lock on the SQLite file, or the
    PostgreSQL connection path pulled (connections refused, pooled ones reset)."""

    def __init__(self, url: str, engines: Any) -> None:
        self.url = url
        self.direct = engines(url)
        upgrade(self.direct)
        self.forwarder: Forwarder | None = None
        if url.startswith("sqlite"):
            self.writer_url = url
            self.engine = engines(url, busy_timeout_ms=50)
        else:
            target = make_url(url)
            self.forwarder = Forwarder((target.host or "127.0.0.1", target.port or 5432))
            self.forwarder.start()
            self.writer_url = target.set(host="127.0.0.1", port=self.forwarder.port).render_as_string(
                hide_password=False
            )
            self.engine = engines(self.writer_url)

    @contextmanager
    def away(self) -> Iterator[None]:
        if self.forwarder is None:
            with sqlite_exclusive(self.url):
                yield
            return
        self.forwarder.stop()
        try:
            yield
        finally:
            self.forwarder.start()

    def rows(self) -> list[dict[str, Any]]:
        with self.direct.connect() as connection:
            found = connection.execute(select(schema.exchanges).order_by(schema.exchanges.c.started_at))
            return [dict(row._mapping) for row in found]

    def row(self) -> dict[str, Any]:
        (only,) = self.rows()
        return only

    def close(self) -> None:
        if self.forwarder is not None:
            self.forwarder.stop()


@pytest.fixture
def store(db_url: str, engines: Any) -> Iterator[Store]:
    made = Store(db_url, engines)
    yield made
    made.close()


@pytest.fixture
def fingerprinter(tmp_path: Path) -> KeyFingerprinter:
    return KeyFingerprinter.from_file(tmp_path / "fingerprint.secret")


def post(fingerprinter: KeyFingerprinter, rid: str = "resp_bg1", at: int = 0) -> Recorded:
    record = to_record(
        http("POST", "/v1/responses", response("queued", rid), at=at, request=CREATE), fingerprinter=fingerprinter
    )
    assert record is not None
    return record


def poll(fingerprinter: KeyFingerprinter, *, at: int, rid: str = "resp_bg1", usage: Any = USAGE, **kw: Any) -> FollowUp:
    body = response("completed", rid, usage=usage, output=answer(kw.pop("said", "Found.")), **kw)
    followup = to_follow_up(http("GET", f"/v1/responses/{rid}", body, at=at), fingerprinter=fingerprinter)
    assert followup is not None
    return followup


def foreground_cost(pricer: Pricer, fingerprinter: KeyFingerprinter, usage: dict[str, Any]) -> int:
    """What the same answer costs when it comes back on the POST itself."""
    body = response("completed", usage=usage) | {"background": False}
    record = to_record(http("POST", "/v1/responses", body, at=0, request={"model": MODEL}), fingerprinter=fingerprinter)
    assert record is not None
    row = rows_for(record).exchanges[0]
    pricer.price_rows([row])
    assert row["price_status"] == "priced"
    return int(row["cost_total_pico"])


def items(path: Path) -> list[RowSet | FollowUp]:
    return [spool.decode_line(line) for line in path.read_bytes().splitlines() if line.strip()]


def spooled(folder: Path) -> list[RowSet | FollowUp]:
    return [item for path in spool_files(folder) for item in items(path)]


def followups_in(folder: Path) -> list[FollowUp]:
    return [item for item in spooled(folder) if isinstance(item, FollowUp)]


def replay_on_close(store: Store, spool_dir: Path, pricer: Pricer) -> Writer:
    """A writer that never goes idle before `close`: the close itself replays the spool."""
    writer = Writer(store.direct, spool_dir=spool_dir, enrich=pricer.price_rows, max_delay=30)
    assert writer.close()
    return writer


def test_a_poll_waits_in_the_spool_across_a_clean_shutdown(
    store: Store, spool_dir: Path, fingerprinter: KeyFingerprinter, caplog: pytest.LogCaptureFixture
) -> None:
    pricer = Pricer()
    writer = Writer(store.engine, spool_dir=spool_dir, enrich=pricer.price_rows, **FAST)
    writer.submit(post(fingerprinter))
    assert writer.flush(10)
    assert store.row()["background_state"] == "queued"
    with store.away(), caplog.at_level(logging.WARNING, logger="llmtap.storage"):
        writer.submit(poll(fingerprinter, at=9))
        assert writer.close()  # the clean shutdown: nothing waits in memory
    assert writer.stats.db_errors >= 1, "the store was never away"
    assert (writer.stats.followups, writer.stats.followups_spooled) == (1, 1)
    assert "1 records are still in the spool" in caplog.text

    (waiting,) = spooled(spool_dir)
    assert isinstance(waiting, FollowUp)
    assert (waiting.route.kind, waiting.route.protocol, waiting.route.response_id) == (
        "poll",
        "openai.responses",
        "resp_bg1",
    )
    assert waiting.state == "completed" and waiting.record.exchange.usage is not None
    assert waiting.record.exchange.usage.input_tokens == 1200
    raw = b"".join(path.read_bytes() for path in spool_files(spool_dir))
    assert KEY.encode() not in raw and b"Bearer" not in raw
    assert waiting.record.response_body is None  # body mode metadata keeps no body, spooled or not
    row = store.row()
    assert (row["background_state"], row["usage_input_tokens"], row["price_status"]) == (
        "queued",
        None,
        "usage_missing",
    )

    replay_on_close(store, spool_dir, pricer)  # the store is back
    row = store.row()
    assert (row["background_state"], row["usage_input_tokens"], row["usage_output_tokens"], row["text"]) == (
        "completed",
        1200,
        300,
        "Found.",
    )
    assert row["duration_ms"] == pytest.approx(9200.0)  # from the POST's start to the poll's end
    assert row["price_status"] == "priced"
    assert row["cost_total_pico"] == foreground_cost(pricer, fingerprinter, USAGE) > 0
    assert not spool_files(spool_dir)

    # Exactly once: the same poll spooled again, with other numbers even, changes nothing.
    again = poll(fingerprinter, at=20, usage=dict(USAGE, input_tokens=99_999), said="Again.")
    spool_dir.mkdir(exist_ok=True)
    (spool_dir / f"spool-1-{9 * 10**18}.jsonl").write_bytes(spool.encode_followup(again))
    replay_on_close(store, spool_dir, pricer)
    assert store.row() == row
    assert not spool_files(spool_dir)


def test_a_poll_never_overtakes_its_post(store: Store, spool_dir: Path, fingerprinter: KeyFingerprinter) -> None:
    """Both spooled: in one file (one batch), and in files of two runs whose names sort the
    poll's first (names sort by pid; a replay goes by time, and rows before follow-ups)."""
    pricer = Pricer()
    with store.away():
        first = Writer(store.engine, spool_dir=spool_dir, enrich=pricer.price_rows, **FAST)
        first.submit(post(fingerprinter, "resp_same"))
        first.submit(poll(fingerprinter, at=5, rid="resp_same"))
        first.submit(post(fingerprinter, "resp_apart", at=1))
        assert first.close()
        second = Writer(store.engine, spool_dir=spool_dir, enrich=pricer.price_rows, **FAST)
        second.submit(poll(fingerprinter, at=7, rid="resp_apart"))
        assert second.close()
    older, newer = spool_files(spool_dir)
    rows, same = items(older)  # one batch: its rows, then its follow-up
    assert isinstance(rows, RowSet) and isinstance(same, FollowUp) and len(rows) == 2
    (apart,) = items(newer)
    assert isinstance(apart, FollowUp) and apart.route.response_id == "resp_apart"
    older_time, newer_time = (int(path.stem.rsplit("-", 1)[1]) for path in (older, newer))
    older.rename(spool_dir / f"spool-99999-{older_time}.jsonl")
    newer.rename(spool_dir / f"spool-1-{newer_time}.jsonl")
    assert store.rows() == []

    replay_on_close(store, spool_dir, pricer)
    rows = {row["response_id"]: row for row in store.rows()}
    assert set(rows) == {"resp_same", "resp_apart"}
    for row in rows.values():
        assert (row["background_state"], row["usage_input_tokens"], row["price_status"]) == (
            "completed",
            1200,
            "priced",
        )
    assert not spool_files(spool_dir)


def test_an_old_rows_only_spool_file_still_replays(store: Store, spool_dir: Path) -> None:
    """The lines an older llmtap wrote, a torn last line included (never acknowledged)."""
    lines = [spool.encode(rows_for(make_record(index))) for index in range(5)]
    assert all(line.startswith(b'{"exchanges":') for line in lines)
    spool_dir.mkdir(mode=0o700)
    path = spool_dir / "spool-4242-1764000000000000000.jsonl"
    path.write_bytes(b"".join(lines) + lines[0][:40])
    writer = Writer(store.direct, spool_dir=spool_dir, max_delay=30)
    assert writer.spool.count() == 5
    assert writer.close()
    assert sorted(row["id"] for row in store.rows()) == [record_id("R", index) for index in range(5)]
    assert not spool_files(spool_dir)


REFUSE = 4242  # input tokens the test's trigger refuses to store


def refuse_in_the_database(engine: Engine) -> None:
    """A trigger that refuses one value: the database refusing a follow-up's content."""
    with engine.begin() as connection:
        if engine.dialect.name == "sqlite":
            connection.execute(
                text(
                    "CREATE TRIGGER refuse_4242 BEFORE UPDATE ON exchanges "
                    f"WHEN NEW.usage_input_tokens = {REFUSE} BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
                )
            )
            return
        connection.execute(
            text(
                "CREATE FUNCTION refuse_4242() RETURNS trigger AS $$ BEGIN "
                f"IF NEW.usage_input_tokens = {REFUSE} THEN "
                "RAISE EXCEPTION 'refused by the test' USING ERRCODE = 'check_violation'; END IF; "
                "RETURN NEW; END $$ LANGUAGE plpgsql"
            )
        )
        connection.execute(
            text("CREATE TRIGGER refuse_4242 BEFORE UPDATE ON exchanges FOR EACH ROW EXECUTE FUNCTION refuse_4242()")
        )


def accept_again(engine: Engine) -> None:
    with engine.begin() as connection:
        connection.execute(
            text("DROP TRIGGER refuse_4242" + (" ON exchanges" if engine.dialect.name != "sqlite" else ""))
        )


def rejected_followups(path: Path) -> list[FollowUp]:
    found = [item for item, problem in rejected.read(path) if problem is None]
    assert all(isinstance(item, FollowUp) for item in found)
    return [item for item in found if isinstance(item, FollowUp)]


def test_a_refused_follow_up_goes_to_the_rejected_file_and_imports_back(
    store: Store, spool_dir: Path, fingerprinter: KeyFingerprinter, tmp_path: Path
) -> None:
    refused_usage = dict(USAGE, input_tokens=REFUSE)
    writer = Writer(store.direct, spool_dir=spool_dir, enrich=Pricer().price_rows)
    try:
        writer.submit(post(fingerprinter))
        assert writer.flush(10)
        refuse_in_the_database(store.direct)
        writer.submit(poll(fingerprinter, at=9, usage=refused_usage))
        assert writer.flush(10)
    finally:
        assert writer.close()
    assert writer.stats.rejected == 0 and writer.stats.followups == 1  # settled, as a follow-up
    row = store.row()
    assert (row["background_state"], row["usage_input_tokens"]) == ("queued", None)
    rejected_file = spool_dir / "rejected.jsonl"
    (kept,) = rejected_followups(rejected_file)
    assert kept.route.response_id == "resp_bg1" and kept.state == "completed"
    assert KEY.encode() not in rejected_file.read_bytes()
    assert oct(rejected_file.stat().st_mode & 0o777) == "0o600"

    accept_again(store.direct)
    # the secret the records were fingerprinted with: the store's (README: One fingerprint per store)
    home = {"LLMTAP_HOME": str(tmp_path / "home"), "LLMTAP_SECRET_FILE": str(tmp_path / "fingerprint.secret")}
    done = llmtap("import", str(rejected_file), "--db", store.url, env=home, process=True)
    assert done.code == 0, done.err
    assert "imported 0 LLM exchanges" in done.out and "1 polls of background work" in done.out
    row = store.row()
    assert (row["background_state"], row["usage_input_tokens"], row["price_status"]) == (
        "completed",
        REFUSE,
        "priced",
    )
    again = llmtap("import", str(rejected_file), "--db", store.url, env=home, process=True)
    assert again.code == 0, again.err
    assert store.row() == row  # completed once


def test_a_spooled_follow_up_refused_on_replay_goes_to_the_rejected_file(
    store: Store, spool_dir: Path, fingerprinter: KeyFingerprinter
) -> None:
    with store.away():
        writer = Writer(store.engine, spool_dir=spool_dir, **FAST)
        writer.submit(post(fingerprinter))
        writer.submit(poll(fingerprinter, at=9, usage=dict(USAGE, input_tokens=REFUSE)))
        assert writer.close()
    assert [type(item) for item in spooled(spool_dir)] == [RowSet, FollowUp]
    refuse_in_the_database(store.direct)
    replay_on_close(store, spool_dir, Pricer())
    assert store.row()["background_state"] == "queued"  # the POST replayed; its poll refused
    assert not spool_files(spool_dir)
    (kept,) = rejected_followups(spool_dir / "rejected.jsonl")
    assert kept.record.exchange.usage is not None and kept.record.exchange.usage.input_tokens == REFUSE


def test_the_writer_process_spools_follow_ups(store: Store, spool_dir: Path, fingerprinter: KeyFingerprinter) -> None:
    """Across the pipe to a writer process: its child spools the poll with the rows."""
    spec = WriterSpec(url=store.writer_url, spool_dir=spool_dir, max_delay=0.02, **FAST)
    with store.away():
        writer = WriterProcess(spec)
        writer.submit(post(fingerprinter))
        writer.submit(poll(fingerprinter, at=9))
        assert writer.close(timeout=60)
        assert (writer.stats.followups, writer.stats.followups_spooled, writer.stats.spooled) == (1, 1, 1)
    assert [type(item) for item in spooled(spool_dir)] == [RowSet, FollowUp]
    replay_on_close(store, spool_dir, Pricer())
    assert (store.row()["background_state"], store.row()["usage_input_tokens"]) == ("completed", 1200)


def test_held_in_memory_while_even_the_disk_refuses(
    tmp_path: Path, engines: Any, fingerprinter: KeyFingerprinter
) -> None:
    """No spool to be had (its folder cannot be made): the poll waits in memory and is
    applied once the lock is gone."""
    url = f"sqlite:///{tmp_path / 'locked.db'}"
    upgrade(engines(url))
    engine = engines(url, busy_timeout_ms=50)
    (tmp_path / "not-a-folder").write_text("")
    writer = Writer(engine, spool_dir=tmp_path / "not-a-folder" / "spool", **FAST)
    try:
        writer.submit(post(fingerprinter))
        assert writer.flush(10)
        lock = LockInThread(url, hold=1.0)
        lock.start()
        writer.submit(poll(fingerprinter, at=9))
        assert writer.flush(10)
        assert writer.stats.db_errors >= 1 and writer.stats.followups_spooled == 0
        assert lock.released.wait(10)

        def completed() -> bool:
            with engine.connect() as connection:
                return connection.execute(select(schema.exchanges.c.usage_input_tokens)).scalar_one() == 1200

        assert wait_until(completed, timeout=10)
    finally:
        assert writer.close()


def test_json_round_trip_keeps_what_apply_needs(fingerprinter: KeyFingerprinter) -> None:
    """A binary body survives as base64, a key-shaped string in the text is scrubbed, and
    a line of neither kind is refused."""
    followup = poll(fingerprinter, at=3, said="leaked sk-proj-" + "A" * 30)
    followup.record.response_body = b"\xff\xfe not utf-8"
    back = spool.decode_line(spool.encode_followup(followup))
    assert isinstance(back, FollowUp)
    assert back.route == followup.route and back.id == followup.id
    assert (back.record.started_at, back.record.ended_at) == (followup.record.started_at, followup.record.ended_at)
    assert back.record.key_fingerprint == followup.record.key_fingerprint
    assert back.record.response_body == b"\xff\xfe not utf-8"
    assert back.record.exchange.usage == followup.record.exchange.usage
    assert back.record.exchange.text == "leaked [REDACTED]"
    assert back.state == "completed"
    line = rejected.followup_line(followup, "refused")
    assert isinstance(rejected.parse(line), FollowUp)
    with pytest.raises(ValueError):
        spool.decode_line(b'{"followup": {"v": 99}}')
    assert json.loads(spool.encode_followup(followup))["followup"]["v"] == 1


@pytest.mark.parametrize("body_mode", ["none", "full"])
def test_the_spool_keeps_what_the_body_mode_keeps(
    store: Store, spool_dir: Path, fingerprinter: KeyFingerprinter, body_mode: str
) -> None:
    """`none`: no answer text in the spool line (nor, after the replay, in the row); `full`:
    the body that completed the exchange, kept by the replay as it would be live."""
    secret_answer = "the answer nobody may keep"
    with store.away():
        writer = Writer(store.engine, spool_dir=spool_dir, body_mode=body_mode, **FAST)
        writer.submit(post(fingerprinter))
        writer.submit(poll(fingerprinter, at=9, said=secret_answer))
        assert writer.close()
    raw = b"".join(path.read_bytes() for path in spool_files(spool_dir))
    (waiting,) = followups_in(spool_dir)
    if body_mode == "none":
        assert secret_answer.encode() not in raw and waiting.record.response_body is None
    else:
        assert waiting.record.response_body is not None and secret_answer.encode() in waiting.record.response_body
    replay = Writer(store.direct, spool_dir=spool_dir, body_mode=body_mode, max_delay=30)
    assert replay.close()
    row = store.row()
    assert (row["background_state"], row["usage_input_tokens"]) == ("completed", 1200)
    if body_mode == "none":
        assert row["text"] is None and row["response_body_ref"] is None
    else:
        assert row["text"] == secret_answer
        with store.direct.connect() as connection:
            kept = json.loads(load_blob(connection, row["response_body_ref"]))
        assert kept["status"] == "completed" and kept["output"] == answer(secret_answer)
