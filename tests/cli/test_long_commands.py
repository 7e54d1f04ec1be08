"""The long commands of SPEC §3 (issue 26), through the real command on the corpus HAR:

- `import --team T` names the team of the entries that carry none (attribution `import`);
  an entry that names its own keeps it (the [auth] cases: tests/storage/test_import_trust.py).
- `export --team/--model/--provider` (each repeats; a name is taken whole, commas and all)
  export exactly those rows, and their `cost_usd` adds up to `report cost`'s row for the
  same team, model or provider, to the pico-dollar.
- Each long command ends with its count; export's is on standard error, and export to
  standard output writes the data and nothing else.
- Progress is drawn on standard error only when it is a terminal (a pty here), never
  into standard output, and never when standard error is a pipe.

Not responsible for the money itself (tests/analytics/test_export_money.py) or what is
imported (tests/storage/test_import*.py).
"""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select, update

from llmtap.lake.catalog import open_catalog
from llmtap.lake.sync import sync
from llmtap.storage import schema
from llmtap.storage.engine import make_engine
from tests.corpus_tools import CORPUS, make_har
from tests.helpers import CONSOLE_SCRIPT, llmtap

pytestmark = pytest.mark.timeout(300)

# round-robin over the corpus; "" sends no team at all (an empty X-LLMTap-Team names no one)
TEAMS = ("alpha", "beta, gamma", "")
IMPORT_TEAM = "imported-ops"


@pytest.fixture(scope="module")
def har(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("long") / "corpus.har"
    make_har(CORPUS, path, teams=TEAMS)
    return path


@pytest.fixture(scope="module")
def store(har: Path) -> Iterator[str]:
    url = f"sqlite:///{har.parent / 'store.db'}"
    done = llmtap("import", str(har), "--team", IMPORT_TEAM, "--db", url)
    assert done.code == 0, done.err
    yield url


def _entries(har: Path) -> int:
    return len(json.loads(har.read_text())["log"]["entries"])


def _who(url: str) -> dict[tuple[str, str], int]:
    engine = make_engine(url)
    try:
        ex = schema.exchanges.c
        with engine.connect() as connection:
            found = connection.execute(select(ex.team, ex.attribution, func.count()).group_by(ex.team, ex.attribution))
            return {(team, attribution): n for team, attribution, n in found}
    finally:
        engine.dispose()


def test_import_team_names_the_entries_without_one_and_no_other(store: str, har: Path) -> None:
    third = len(range(2, _entries(har), 3))
    who = _who(store)
    assert who == {
        ("alpha", "header"): len(range(0, _entries(har), 3)),
        ("beta, gamma", "header"): len(range(1, _entries(har), 3)),
        (IMPORT_TEAM, "import"): third,
    }


def test_import_ends_with_its_count(tmp_path: Path, har: Path) -> None:
    done = llmtap("import", str(har), "--db", f"sqlite:///{tmp_path / 's.db'}")
    assert done.code == 0, done.err
    assert done.out.startswith(f"imported {_entries(har)} LLM exchanges (0 already stored)")
    assert done.err == ""  # no bar, no escape codes: standard error is no terminal here


def _export(url: str, folder: Path, *args: str) -> tuple[list[dict[str, Any]], str]:
    target = folder / "export.jsonl"
    done = llmtap("export", "-o", str(target), *args, "--db", url)
    assert done.code == 0, done.err
    rows = [json.loads(line, parse_float=Decimal) for line in target.read_text().splitlines()]
    return rows, done.err


def _report(url: str, by: str) -> dict[str, dict[str, Any]]:
    done = llmtap("report", "cost", "--by", by, "--format", "json", "--db", url)
    assert done.code == 0, done.err
    return {row[by]: row for row in done.json()}


def _cost(rows: list[dict[str, Any]]) -> Decimal:
    return sum((Decimal(str(r["cost_usd"])) for r in rows if r["cost_usd"] is not None), Decimal(0))


def _model(row: dict[str, Any]) -> str:
    return row["model"] or row["model_requested"] or "(unknown)"


@pytest.mark.parametrize(
    ("by", "field"),
    [
        pytest.param("team", lambda row: row["team"], id="team"),
        pytest.param("model", _model, id="model"),
        pytest.param("provider", lambda row: row["provider"], id="provider"),
    ],
)
def test_export_filters_pick_the_rows_report_cost_sums(store: str, tmp_path: Path, by: str, field: Any) -> None:
    report = _report(store, by)
    everything, _ = _export(store, tmp_path)
    assert len(report) >= 3, report  # the corpus has several of each
    for name, line in report.items():
        rows, err = _export(store, tmp_path, f"--{by}", name)
        assert rows and {field(row) for row in rows} == {name}, name
        assert len(rows) == line["requests"] == sum(1 for row in everything if field(row) == name)
        if line["cost_usd"] is not None:
            assert _cost(rows) == Decimal(str(line["cost_usd"])), name
        assert err.startswith(f"exported {len(rows):,} exchange"), err
    # a repeated flag takes any of its names
    two = sorted(report)[:2]
    rows, _ = _export(store, tmp_path, f"--{by}", two[0], f"--{by}", two[1])
    assert len(rows) == sum(report[name]["requests"] for name in two)
    assert _cost(rows) == sum((Decimal(str(report[n]["cost_usd"] or 0)) for n in two), Decimal(0))


def test_export_filters_combine_and_a_team_name_keeps_its_comma(store: str, tmp_path: Path) -> None:
    everything, _ = _export(store, tmp_path)
    provider = everything[0]["provider"]
    rows, _ = _export(store, tmp_path, "--team", "beta, gamma", "--provider", provider)
    expected = [r["id"] for r in everything if r["team"] == "beta, gamma" and r["provider"] == provider]
    assert [r["id"] for r in rows] == expected and expected
    nothing, err = _export(store, tmp_path, "--team", "beta")  # not a list: no team is called "beta"
    assert nothing == [] and err.startswith("exported 0 exchanges to ")


def test_export_to_stdout_is_the_data_and_its_count_is_on_stderr(store: str, tmp_path: Path) -> None:
    target = tmp_path / "export.jsonl"
    to_file = llmtap("export", "-o", str(target), "--db", store)
    to_stdout = llmtap("export", "--db", store)
    assert to_file.code == to_stdout.code == 0, to_stdout.err
    assert to_stdout.out == target.read_text() and to_file.out == ""
    count = len(to_stdout.out.splitlines())
    assert to_stdout.err == f"exported {count} exchanges to stdout\n"
    size = re.escape(f"{target} (") + r"[\d.]+ kB\)"
    assert re.fullmatch(f"exported {count} exchanges to {size}\n", to_file.err), to_file.err


def _forget_prices(url: str, every: int) -> int:
    """Rows stored without a price, as an import before a pricer ran leaves them."""
    engine = make_engine(url)
    try:
        x = schema.exchanges.c
        with engine.begin() as connection:
            ids = sorted(connection.execute(select(x.id)).scalars())[::every]
            cleared = {name: None for name in ("price_status", "price_version", "cost_total_pico", "cost_input_pico")}
            connection.execute(update(schema.exchanges).where(x.id.in_(ids)).values(**cleared))
        return len(ids)
    finally:
        engine.dispose()


def test_reprice_says_how_many_it_priced_and_how_many_changed(tmp_path: Path, har: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    assert llmtap("import", str(har), "--db", url).code == 0
    same = llmtap("reprice", "--db", url)
    assert same.code == 0 and same.out.startswith(f"repriced {_entries(har)} exchanges (0 changed) with "), same.out
    forgotten = _forget_prices(url, 4)
    again = llmtap("reprice", "--db", url)
    assert again.out.startswith(f"repriced {_entries(har)} exchanges ({forgotten} changed) with "), again.out


def test_reprocess_and_prune_end_with_their_counts(tmp_path: Path, har: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    assert llmtap("import", str(har), "--bodies", "full", "--db", url).code == 0
    reprocessed = llmtap("reprocess", "--db", url)
    assert reprocessed.code == 0 and reprocessed.err == ""
    assert reprocessed.out.startswith(f"reprocessed {_entries(har)} exchanges ("), reprocessed.out
    pruned = llmtap("prune", "--older-than", "1h", "--db", url)
    assert pruned.code == 0 and pruned.err == ""
    assert pruned.out.startswith(f"pruned {_entries(har)} exchanges started before "), pruned.out


def test_lake_sync_tells_its_progress_after_each_commit(tmp_path: Path, har: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    assert llmtap("import", str(har), "--db", url).code == 0
    told: list[tuple[str, int]] = []
    catalog = open_catalog(url, str(tmp_path / "lake"))
    engine = make_engine(url)
    try:
        done = sync(engine, catalog, chunk=10, progress=lambda table, rows: told.append((table, rows)))
    finally:
        engine.dispose()
        catalog.engine.dispose()
    exchanges = [rows for table, rows in told if table == "llmtap.exchanges"]
    assert exchanges == sorted(exchanges) and exchanges[-1] == done[0].written == _entries(har)
    assert len(exchanges) == done[0].commits > 1


def _on_a_terminal(*args: str, stdout: Path | None) -> tuple[int, str]:
    """`llmtap ARGS…` with standard error on a pty (a terminal) and standard output to a
    file (None: on the pty too); what the terminal got, escape codes and all."""
    master, slave = pty.openpty()
    with stdout.open("wb") if stdout else open(os.devnull, "wb") as out:
        child = subprocess.Popen(
            [str(CONSOLE_SCRIPT), *args],
            stdout=out if stdout else slave,
            stderr=slave,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "COLUMNS": "100", "TERM": "xterm"},
        )
        os.close(slave)
        got = bytearray()
        while True:  # until the child closes its end (EIO on Linux)
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            got += chunk
        code = child.wait(timeout=240)
    os.close(master)
    return code, got.decode("utf-8", "replace")


@pytest.mark.slow
def test_progress_is_drawn_on_a_terminal_and_never_into_the_data(store: str, tmp_path: Path) -> None:
    data = tmp_path / "stdout.jsonl"
    code, terminal = _on_a_terminal("export", "--db", store, stdout=data)
    assert code == 0, terminal
    assert "exporting" in terminal and "\x1b[" in terminal  # the bar, drawn and then cleared
    assert terminal.rstrip().endswith(f"exported {len(data.read_text().splitlines())} exchanges to stdout")
    piped = llmtap("export", "--db", store, process=True)
    assert piped.out == data.read_text()  # stdout the same bytes, bar or not
    assert "exporting" not in piped.err and "\x1b" not in piped.err and len(piped.err.splitlines()) == 1

    # rows scrolling past on the terminal are their own progress: no bar among them
    code, terminal = _on_a_terminal("export", "--team", "alpha", "--db", store, stdout=None)
    assert code == 0 and '"team": "alpha"' in terminal and "exporting" not in terminal, terminal[-500:]
    assert terminal.rstrip().endswith("exchanges to stdout")

    code, terminal = _on_a_terminal("reprice", "--db", store, stdout=tmp_path / "reprice.txt")
    assert code == 0 and "repricing" in terminal, terminal
    assert (tmp_path / "reprice.txt").read_text().startswith("repriced ")

    lake = tmp_path / "lake"
    code, terminal = _on_a_terminal("lake", "sync", "--warehouse", str(lake), "--db", store, stdout=tmp_path / "l")
    assert code == 0 and "syncing the lake" in terminal, terminal
    assert "llmtap.exchanges: " in (tmp_path / "l").read_text()


@pytest.mark.slow
def test_reprocess_and_prune_show_progress_on_a_terminal(tmp_path: Path, har: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    assert llmtap("import", str(har), "--bodies", "full", "--db", url).code == 0
    code, terminal = _on_a_terminal("reprocess", "--db", url, stdout=tmp_path / "reprocess.txt")
    assert code == 0 and "reprocessing" in terminal, terminal
    assert (tmp_path / "reprocess.txt").read_text().startswith(f"reprocessed {_entries(har)} exchanges")
    code, terminal = _on_a_terminal("prune", "--older-than", "1h", "--db", url, stdout=tmp_path / "prune.txt")
    assert code == 0 and f"pruning {_entries(har)} exchanges" in terminal, terminal
    assert (tmp_path / "prune.txt").read_text().startswith(f"pruned {_entries(har)} exchanges")
