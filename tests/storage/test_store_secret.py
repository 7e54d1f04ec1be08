"""One fingerprint per store (SPEC §4) through the real commands, on SQLite and PostgreSQL:
`llmtap import` and `llmtap fingerprint` use the store's secret and refuse another in one
line; a store written before the store kept its secret adopts the first one unless its rows
were fingerprinted with two, and `llmtap fingerprint rekey --from OLD` makes such a store
one secret's (fingerprints and the conversations they scope); rows spooled under another
secret keep saying whose they are until rekeyed; two processes adopting at once agree."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, select

from llmtap.storage import migrate, schema, store_secret, store_settings
from llmtap.storage.errors import StoreError
from llmtap.storage.rows import rows_for
from llmtap.storage.secrets import KeyFingerprinter, load_or_create_secret
from llmtap.storage.spool import Spool
from llmtap.storage.writer import Writer
from tests.corpus_tools import CORPUS, har_entry, planted_key, read_case
from tests.helpers import llmtap
from tests.storage.helpers import T0, make_record

KEY = "sk-ant-api03-STORESECRET" + "q" * 24 + "Wxyz"
OTHER_KEY = "sk-ant-api03-OTHERKEY" + "r" * 24 + "Abcd"
CASE = "a_anth_json_cache_write"


def fingerprint_of(secret_file: Path, key: str) -> str:
    return hmac.new(secret_file.read_bytes().strip(), key.encode(), hashlib.sha256).hexdigest()[:32]


def write_har(path: Path, key: str, n: int = 1) -> Path:
    case, body, request = read_case(CORPUS / CASE)
    header, _ = planted_key(case)
    entries = []
    for index in range(n):
        entry = har_entry(case, body, request, "team-x", T0 + timedelta(minutes=index))
        for item in entry["request"]["headers"]:
            if item["name"] == header:
                item["value"] = key
        entries.append(entry)
    path.write_text(
        json.dumps({"log": {"version": "1.2", "creator": {"name": "t", "version": "1"}, "entries": entries}})
    )
    return path


def home(folder: Path) -> dict[str, str | None]:
    return {"LLMTAP_HOME": str(folder), "LLMTAP_CONFIG": None, "LLMTAP_SECRET_FILE": None}


def fingerprints(engine: Engine) -> list[tuple[str | None, str | None, str | None]]:
    ex = schema.exchanges.c
    with engine.connect() as connection:
        query = select(ex.key_last4, ex.key_fingerprint, ex.key_secret_id).order_by(ex.id)
        return [tuple(row) for row in connection.execute(query)]  # type: ignore[misc]


def one_line_error(result) -> str:
    assert result.code == 2, (result.code, result.out, result.err)
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("llmtap: error:"), lines
    return lines[0]


# -- import and fingerprint use the store's secret ---------------------------------------------


def test_import_uses_the_store_secret_and_refuses_another(db_url, engines, tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    har = write_har(tmp_path / "one.har", KEY)
    printed = llmtap("fingerprint", "--db", db_url, env=home(first), stdin=KEY + "\n")
    assert printed.code == 0, printed.err
    expected = fingerprint_of(first / "fingerprint.secret", KEY)
    assert printed.out.startswith(f'"{expected}" = "TEAM"') and KEY not in printed.out + printed.err

    refused = llmtap("import", str(har), "--db", db_url, env=home(second))
    line = one_line_error(refused)
    assert str(second / "fingerprint.secret") in line and "secret_file" in line
    engine = engines(db_url)
    assert fingerprints(engine) == []  # nothing written by the process with the other secret

    config = tmp_path / "second.toml"
    config.write_text(f'secret_file = "{first / "fingerprint.secret"}"\n')
    imported = llmtap("import", str(har), "--db", db_url, "--config", str(config), env=home(second))
    assert imported.code == 0, imported.err
    store_id = KeyFingerprinter.from_file(first / "fingerprint.secret").secret_id
    assert fingerprints(engine) == [(KEY[-4:], expected, store_id)]
    again = llmtap("fingerprint", "--db", db_url, env=home(second), stdin=KEY + "\n")
    assert "secret_file" in one_line_error(again)


def test_a_missing_secret_file_is_not_made_when_the_store_has_one(db_url, tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    assert llmtap("fingerprint", "--db", db_url, env=home(first), stdin=KEY + "\n").code == 0
    line = one_line_error(llmtap("fingerprint", "--db", db_url, env=home(second), stdin=KEY + "\n"))
    assert str(second / "fingerprint.secret") in line
    assert not (second / "fingerprint.secret").exists()  # a new random one would only be refused


def test_status_says_whose_secret_the_store_has(db_url, tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    assert llmtap("import", str(write_har(tmp_path / "a.har", KEY)), "--db", db_url, env=home(first)).code == 0
    ours = llmtap("fingerprint", "status", "--db", db_url, env=home(first))
    assert ours.code == 0, ours.err
    store_id = KeyFingerprinter.from_file(first / "fingerprint.secret").secret_id
    assert store_id in ours.out and "matches" in ours.out
    load_or_create_secret(second / "fingerprint.secret")
    theirs = llmtap("fingerprint", "status", "--db", db_url, env=home(second))
    assert theirs.code == 1 and store_id in theirs.out and "differs" in theirs.out


# -- a store that has two ----------------------------------------------------------------------


def diverged_store(engine: Engine, spool_dir: Path, secrets: dict[str, KeyFingerprinter]) -> None:
    """What a fleet of two homes left in a store before it kept its secret: KEY through
    both (one session, so one conversation were it one key), OTHER_KEY through the second."""
    writer = Writer(engine, spool_dir=spool_dir, max_delay=0.01)
    plan = [("a", KEY), ("b", KEY), ("a", KEY), ("b", KEY), ("b", OTHER_KEY)]
    for index, (who, key) in enumerate(plan):
        record = make_record(index)
        record.key_fingerprint = secrets[who].fingerprint(key)
        record.key_last4 = KeyFingerprinter.last4(key)
        record.request_headers = [("x-claude-code-session-id", "session-1")]
        writer.submit(record)
    assert writer.close() and writer.stats.written == len(plan)
    migrate.downgrade(engine, "0010")  # the schema before the store kept its secret
    migrate.upgrade(engine)


def test_rekey_makes_a_store_with_two_secrets_one_secrets(db_url, engines, tmp_path, spool_dir):
    first, second = tmp_path / "first", tmp_path / "second"
    secrets = {
        "a": KeyFingerprinter(load_or_create_secret(first / "fingerprint.secret")),
        "b": KeyFingerprinter(load_or_create_secret(second / "fingerprint.secret")),
    }
    engine = engines(db_url)
    migrate.upgrade(engine)
    diverged_store(engine, spool_dir, secrets)
    har = write_har(tmp_path / "one.har", KEY)

    line = one_line_error(llmtap("import", str(har), "--db", db_url, env=home(first)))
    assert "more than one secret" in line and f"…{KEY[-4:]}" in line and "rekey" in line
    assert store_settings.read(engine, store_secret.SETTING) is None  # nobody's secret adopted

    config = tmp_path / "first.toml"
    config.write_text(f'[teams]\n"{secrets["b"].fingerprint(KEY)}" = "search"\n')
    rekeyed = llmtap(
        "fingerprint", "rekey", "--from", str(second / "fingerprint.secret"), "--db", db_url,
        "--config", str(config), env=home(first), stdin=f"{KEY}\n\n",
    )  # fmt: skip
    assert rekeyed.code == 0, rekeyed.err
    assert KEY not in rekeyed.out + rekeyed.err
    new = secrets["a"].fingerprint(KEY)
    # the key map's entry under the store's secret, with the team the old one named
    assert f'"{new}" = "search"' in rekeyed.out and f"…{KEY[-4:]}" in rekeyed.out
    store_id, old_id = secrets["a"].secret_id, secrets["b"].secret_id
    rows = fingerprints(engine)
    assert rows[:4] == [(KEY[-4:], new, store_id)] * 4
    assert rows[4] == (OTHER_KEY[-4:], secrets["b"].fingerprint(OTHER_KEY), None)  # no key given: left as it was
    with engine.connect() as connection:
        threads = connection.execute(select(schema.exchanges.c.thread_key).order_by(schema.exchanges.c.id)).scalars()
        keys = list(threads)
    assert len(set(keys[:4])) == 1 and keys[4] != keys[0]  # one key's one session: one conversation again

    assert llmtap("import", str(har), "--db", db_url, env=home(first)).code == 0
    assert sorted(fingerprints(engine)) == sorted([*rows, (KEY[-4:], new, store_id)])
    assert "secret_file" in one_line_error(llmtap("import", str(har), "--db", db_url, env=home(second)))
    assert old_id != store_id


def test_rekey_refuses_what_it_cannot_do(db_url, tmp_path):
    first = tmp_path / "first"
    assert llmtap("fingerprint", "--db", db_url, env=home(first), stdin=KEY + "\n").code == 0
    missing = llmtap(
        "fingerprint", "rekey", "--from", str(tmp_path / "nope"), "--db", db_url, env=home(first), stdin=""
    )
    assert "nope" in one_line_error(missing)
    same = llmtap(
        "fingerprint", "rekey", "--from", str(first / "fingerprint.secret"), "--db", db_url, env=home(first), stdin=""
    )
    assert "already" in one_line_error(same)
    no_from = llmtap("fingerprint", "--from", str(first / "fingerprint.secret"), "--db", db_url, env=home(first))
    assert "rekey" in one_line_error(no_from)


def test_a_store_of_one_secret_adopts_it_after_the_upgrade(db_url, engines, tmp_path, spool_dir):
    first = tmp_path / "first"
    ours = KeyFingerprinter(load_or_create_secret(first / "fingerprint.secret"))
    engine = engines(db_url)
    migrate.upgrade(engine)
    diverged_store(engine, spool_dir, {"a": ours, "b": ours})
    assert llmtap("import", str(write_har(tmp_path / "one.har", KEY)), "--db", db_url, env=home(first)).code == 0
    assert store_settings.read(engine, store_secret.SETTING)["id"] == ours.secret_id
    assert {fingerprint for _, fingerprint, _ in fingerprints(engine)[:4]} == {ours.fingerprint(KEY)}


# -- spool replays and racing adopters ---------------------------------------------------------


def test_rows_spooled_under_another_secret_say_so_until_rekeyed(db_url, engines, tmp_path, spool_dir):
    first, second = tmp_path / "first", tmp_path / "second"
    ours = KeyFingerprinter(load_or_create_secret(first / "fingerprint.secret"))
    theirs = KeyFingerprinter(load_or_create_secret(second / "fingerprint.secret"))
    engine = engines(db_url)
    migrate.upgrade(engine)
    store_secret.fingerprinter_for(engine, first / "fingerprint.secret", by="test")
    # a batch an earlier run spooled while the store was away, fingerprinted with its secret then
    spooled = make_record(1)
    spooled.key_fingerprint, spooled.key_last4 = theirs.fingerprint(KEY), KEY[-4:]
    spooled.key_secret_id = theirs.secret_id
    earlier = Spool(spool_dir)
    earlier.append(rows_for(spooled))
    earlier.close()
    writer = Writer(engine, spool_dir=spool_dir, max_delay=0.01, key_secret_id=ours.secret_id)
    fresh = make_record(2)
    fresh.key_fingerprint, fresh.key_last4 = ours.fingerprint(KEY), KEY[-4:]
    writer.submit(fresh)
    assert writer.close() and writer.stats.replayed == 1
    assert fingerprints(engine) == [
        (KEY[-4:], theirs.fingerprint(KEY), theirs.secret_id),
        (KEY[-4:], ours.fingerprint(KEY), ours.secret_id),
    ]
    status = llmtap("fingerprint", "status", "--db", db_url, env=home(first))
    assert theirs.secret_id in status.out and "rekey" in status.out
    rekeyed = llmtap(
        "fingerprint", "rekey", "--from", str(second / "fingerprint.secret"), "--db", db_url,
        env=home(first), stdin=KEY + "\n",
    )  # fmt: skip
    assert rekeyed.code == 0, rekeyed.err
    assert fingerprints(engine) == [(KEY[-4:], ours.fingerprint(KEY), ours.secret_id)] * 2


def test_two_processes_adopting_at_once_agree_on_one(db_url, engines: Callable[..., Engine], tmp_path):
    migrate.upgrade(engines(db_url))
    files = [tmp_path / f"secret-{i}" for i in range(2)]
    for path in files:
        load_or_create_secret(path)
    outcomes: list[str] = []
    start = threading.Barrier(2)

    def adopt(path: Path) -> None:
        start.wait()
        try:
            outcomes.append(store_secret.fingerprinter_for(engines(db_url), path, by="test").secret_id)
        except StoreError as exc:
            outcomes.append(f"refused: {exc}")

    threads = [threading.Thread(target=adopt, args=(path,)) for path in files]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    adopted = store_settings.read(engines(db_url), store_secret.SETTING)["id"]
    assert sorted(o.startswith("refused") for o in outcomes) == [False, True], outcomes
    assert adopted in outcomes
    assert "\n" not in "".join(outcomes)


@pytest.mark.parametrize("damaged", [b"short", b""])
def test_a_damaged_secret_file_is_refused_not_replaced_when_the_store_has_one(db_url, tmp_path, damaged):
    first = tmp_path / "first"
    assert llmtap("fingerprint", "--db", db_url, env=home(first), stdin=KEY + "\n").code == 0
    before = (first / "fingerprint.secret").read_bytes()
    (first / "fingerprint.secret").write_bytes(damaged)
    one_line_error(llmtap("fingerprint", "--db", db_url, env=home(first), stdin=KEY + "\n"))
    assert (first / "fingerprint.secret").read_bytes() == damaged != before


# -- the migration -----------------------------------------------------------------------------


def test_the_migration_up_and_down_keeps_every_fingerprint(db_url, engines, tmp_path, spool_dir):
    """0011 with rows in place: rows from before it keep their fingerprints with no secret
    id (unknown); the store adopts a secret after it and new rows name it; down again, the
    store forgets whose secret it had (the setting and the ids go, the fingerprints stay),
    and up again the next process adopts anew."""
    ours = KeyFingerprinter(load_or_create_secret(tmp_path / "ours"))
    engine = engines(db_url)
    migrate.upgrade(engine)
    diverged_store(engine, spool_dir, {"a": ours, "b": ours})  # written, then down to 0010 and up
    before = [(last4, fingerprint) for last4, fingerprint, _ in fingerprints(engine)]
    assert {secret for _, _, secret in fingerprints(engine)} == {None}
    store_secret.fingerprinter_for(engine, tmp_path / "ours", by="test")
    writer = Writer(engine, spool_dir=spool_dir, max_delay=0.01, key_secret_id=ours.secret_id)
    record = make_record(9)
    record.key_fingerprint, record.key_last4 = ours.fingerprint(KEY), KEY[-4:]
    writer.submit(record)
    assert writer.close() and writer.stats.written == 1
    assert fingerprints(engine)[-1] == (KEY[-4:], ours.fingerprint(KEY), ours.secret_id)

    migrate.downgrade(engine, "0010")
    assert store_settings.read(engine, store_secret.SETTING) is None
    migrate.upgrade(engine)
    after = fingerprints(engine)
    assert [(last4, fingerprint) for last4, fingerprint, _ in after] == [*before, (KEY[-4:], ours.fingerprint(KEY))]
    assert {secret for _, _, secret in after} == {None}
    other = tmp_path / "other"
    load_or_create_secret(other)
    # every row was one secret's, so whoever comes first is taken at its word
    assert (
        store_secret.fingerprinter_for(engine, other, by="test").secret_id
        == store_settings.read(engine, store_secret.SETTING)["id"]
    )
