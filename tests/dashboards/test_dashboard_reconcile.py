"""The dashboard's reconcile section: `llmtap reconcile` against the simulator's Anthropic
admin API (model, workspace and key names that are markup and script), then `llmtap
dashboard` of the same store in a real headless Chromium shows its rows and totals as
text, runs no script of theirs and grows no element of theirs; a dashboard of another
store shows none of it. And the saved results read back (analytics/reconcile_saved.py):
corrupt, oversized, wrong-shape and other-store files are a note each, never a section.

Not responsible for the matching (tests/analytics/test_reconcile.py) or the command's
causes and hostile servers (tests/cli/test_reconcile_cli.py).
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from llmtap.analytics import reconcile_saved as saved
from llmtap.analytics.render import money
from llmtap.dashboards import page
from llmtap.simulator import admin_anthropic as an
from llmtap.simulator.upstream import Upstream
from tests.analytics import wire as w
from tests.analytics.conftest import fill
from tests.dashboards.test_dashboard import open_page
from tests.helpers import llmtap

ADMIN = "sk-ant-admin01-dashboard-" + "d" * 40
SONNET = "claude-sonnet-4-5-20250929"
HOSTILE_MODEL = "<img src=x onerror=alert(1)>"
HOSTILE_WORKSPACE = "</script><script>alert(2)</script>"
HOSTILE_KEY = "<b id=injected>key</b>"
D1 = datetime(2026, 11, 2, tzinfo=UTC)
WINDOW = ("--since", "2026-11-02", "--until", "2026-11-04")


def _record(n: int, at: datetime) -> Any:
    model = SONNET
    return w.record(
        w.ANTHROPIC,
        w.anthropic_request(model, [{"role": "user", "content": f"reconcile {n}"}], cache=None),
        w.anthropic_response(model, w.anthropic_usage(1000, 0, 0, 100), msg_id=f"msg_dash{n}"),
        at=at,
        team="recon",
        key="test-key-dash-anthropic-KD01",
    )


def _admin() -> an.AnthropicAdmin:
    def tokens(fresh: int, out: int) -> dict[str, int]:
        return {"uncached_input_tokens": fresh, "output_tokens": out}

    use = [
        an.Usage(D1 + timedelta(hours=10), SONNET, "apikey_d", "wrk_1", **tokens(2000, 200)),
        an.Usage(D1 + timedelta(hours=11), HOSTILE_MODEL, "apikey_d", "wrk_1", **tokens(500, 50)),
        an.Usage(D1 + timedelta(hours=12), SONNET, "apikey_x", HOSTILE_WORKSPACE, **tokens(300, 30)),
        an.Usage(D1 + timedelta(hours=13), SONNET, HOSTILE_KEY, "wrk_1", **tokens(100, 10)),
    ]
    day = D1.date()
    costs = [
        an.Cost(day=day, cents=Decimal("1.5"), model=SONNET, workspace_id="wrk_1"),
        an.Cost(day=day, cents=Decimal("77"), model=HOSTILE_MODEL, workspace_id="wrk_1"),
        an.Cost(day=day, cents=Decimal("12"), model=SONNET, workspace_id=HOSTILE_WORKSPACE),
    ]
    keys = [
        an.Key("apikey_d", "dash", "test-k...KD01", D1, "wrk_1"),
        an.Key("apikey_x", "<i>x</i>", "test-k...KX02", D1, HOSTILE_WORKSPACE),
    ]
    return an.AnthropicAdmin(ADMIN, usage=use, costs=costs, keys=keys)


@pytest.fixture(scope="module")
def reconciled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A store with llmtap's exchanges, a home where `llmtap reconcile` kept its result
    for it, that result as the command printed it, and the env both share."""
    folder = tmp_path_factory.mktemp("dashboard-reconcile")
    url = f"sqlite:///{folder / 'store.db'}"
    fill(url, [_record(1, D1 + timedelta(hours=9)), _record(2, D1 + timedelta(hours=10))], folder / "spool")
    env = {**os.environ, "LLMTAP_HOME": str(folder / "home")}
    env.pop("LLMTAP_CONFIG", None)
    with Upstream(_admin()) as upstream:
        result = llmtap(
            "reconcile",
            "--provider",
            "anthropic",
            *WINDOW,
            "--api-base",
            upstream.url,
            "--db",
            url,
            "--format",
            "json",
            env={**env, "ANTHROPIC_ADMIN_KEY": ADMIN},
        )
    assert result.code == 0, result.err
    rows = json.loads(result.out, parse_float=Decimal)
    return {"url": url, "env": env, "home": folder / "home", "rows": rows, "folder": folder}


def test_the_section_shows_the_rows_and_totals_and_runs_no_script_of_theirs(
    reconciled: dict[str, Any], browser, tmp_path: Path
) -> None:
    kept = json.loads((reconciled["home"] / "reconcile-anthropic.json").read_text())
    assert kept["store"] == saved.store_identity(reconciled["url"])
    assert len(kept["store"]) == 16 and ADMIN not in json.dumps(kept)
    *body, total = reconciled["rows"]
    models = {row["model"] for row in body}
    assert HOSTILE_MODEL in models and {HOSTILE_WORKSPACE, HOSTILE_KEY} <= {r["workspace"] for r in body} | {
        r["key"] for r in body
    }

    output = tmp_path / "dashboard.html"
    made = llmtap("dashboard", "--db", reconciled["url"], "-o", str(output), env=reconciled["env"], process=True)
    assert made.code == 0, made.err
    assert "note" not in made.err
    html = output.read_text()
    for hostile in (HOSTILE_MODEL, HOSTILE_WORKSPACE, HOSTILE_KEY):
        assert hostile not in html  # only ever escaped, in the section and in the page's data
    assert ADMIN not in html

    page_, problems, dialogs = open_page(browser, output.as_uri())
    try:
        section = page_.locator("#reconcile")
        assert section.count() == 1
        assert "anthropic: UTC days 2026-11-02 to 2026-11-03" in section.locator("h3").text_content()
        cells = section.locator("table.reconcile-rows tbody tr")
        assert cells.count() == len(body)
        shown = [
            page_.locator("#reconcile tbody tr").nth(i).locator("td").all_text_contents() for i in range(len(body))
        ]
        for row, texts in zip(body, shown, strict=True):
            assert texts[0] == row["day"]
            assert texts[1] == (row["model"] or "")
            assert texts[2] == (row["workspace"] or "")
            assert texts[3] == (row["key"] or "")
            assert texts[4:7] == [money(row[c]) for c in ("provider_cost_usd", "llmtap_cost_usd", "gap_usd")]
            assert texts[7] == ", ".join(row["causes"])
        hostile_row = shown[[r["model"] for r in body].index(HOSTILE_MODEL)]
        assert hostile_row[1] == HOSTILE_MODEL and hostile_row[7] == "not_recorded"
        line = section.locator(".reconcile-total").text_content()
        assert f"provider {money(total['provider_cost_usd'])}" in line
        assert f"llmtap {money(total['llmtap_cost_usd'])}" in line
        assert f"gap {money(total['gap_usd'])}" in line
        assert ", ".join(total["causes"]) in line
        # nothing of theirs ran or became an element
        assert dialogs == [] and problems == []
        assert page_.locator("img").count() == 0
        assert page_.locator("#injected").count() == 0 and page_.locator("#reconcile b, #reconcile i").count() == 0
        assert page_.evaluate("document.querySelectorAll('script').length") == 4  # the page's own
    finally:
        page_.close()
    narrow, problems, _ = open_page(browser, output.as_uri(), viewport={"width": 1024, "height": 800})
    try:  # in the same look as the other sections: no sideways scroll at 1,024 px
        assert narrow.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        box = narrow.locator("#reconcile").bounding_box()
        assert box is not None and box["x"] + box["width"] <= 1024
        assert problems == []
    finally:
        narrow.close()


def test_the_served_dashboard_carries_it_too(reconciled: dict[str, Any]) -> None:
    from tests.dashboards.conftest import serving

    with serving(reconciled["url"], reconciled["env"]) as served:
        data = json.loads(served.fetch("data.json"))
        html = served.fetch("").decode()
    (result,) = data["reconcile"]["results"]
    assert result["provider"] == "anthropic" and result["scope"] == "workspace"
    assert Decimal(result["total"]["gap_usd"]) == reconciled["rows"][-1]["gap_usd"]
    assert 'id="reconcile"' in html and HOSTILE_MODEL not in html


def test_a_dashboard_of_another_store_shows_none_of_it(reconciled: dict[str, Any], tmp_path: Path) -> None:
    other = f"sqlite:///{reconciled['folder'] / 'other.db'}"
    output = tmp_path / "other.html"
    made = llmtap("dashboard", "--db", other, "-o", str(output), env=reconciled["env"])
    assert made.code == 0, made.err
    assert "reconcile-anthropic.json: made for another store; not shown" in made.err
    html = output.read_text()
    assert 'id="reconcile"' not in html and "claude-sonnet" not in html


# -- the saved results, read back --------------------------------------------------------------

STORE = saved.store_identity("sqlite:////tmp/llmtap-test/store.db")


def _row(day: str = "2026-11-02", model: str | None = SONNET, **more: Any) -> dict[str, Any]:
    row: dict[str, Any] = {"day": day, "model": model, "workspace": "wrk_1", "key": "…KD01"}
    row.update(dict.fromkeys(saved.TOKEN_COLUMNS, 10))
    row.update(provider_cost_usd=1.25, llmtap_cost_usd=1, gap_usd=0.25, causes=["price_differs"])
    return {**row, **more}


def _document(**more: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "provider": "anthropic",
        "store": STORE,
        "since": "2026-11-02",
        "until": "2026-11-04",
        "made_at": "2026-11-05T10:00:00+00:00",
        "rows": [_row(), _row(day="total", model=None, workspace=None, key=None)],
    }
    return {**document, **more}


def _write(home: Path, document: Any, provider: str = "anthropic") -> Path:
    home.mkdir(exist_ok=True)
    path = home / f"reconcile-{provider}.json"
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path


def _section(loaded: saved.Loaded) -> str:
    html = page.render({"reconcile": {"results": [s.shown() for s in loaded.saved], "notes": loaded.notes}}, store="s")
    return html


def test_a_good_file_is_read_back_exactly(tmp_path: Path) -> None:
    _write(tmp_path, _document())
    loaded = saved.load_saved(tmp_path, STORE)
    assert loaded.notes == []
    (result,) = loaded.saved
    assert result.provider == "anthropic" and result.scope == "workspace"
    assert result.rows[0]["provider_cost_usd"] == Decimal("1.25") and result.total["day"] == "total"
    assert result.shown()["last_day"] == "2026-11-03"
    assert 'id="reconcile"' in _section(loaded)


def test_no_file_is_no_section_and_no_note(tmp_path: Path) -> None:
    loaded = saved.load_saved(tmp_path / "nowhere", STORE)
    assert loaded.saved == [] and loaded.notes == []
    assert 'id="reconcile"' not in _section(loaded)


@pytest.mark.parametrize(
    ("document", "why"),
    [
        pytest.param('{"provider": "anthropic", "rows": [', "not JSON", id="corrupt"),
        pytest.param("\xff\xfe", "not JSON", id="not-utf8"),
        pytest.param("[" * 100_000, "not JSON", id="deep"),
        pytest.param(_document(store="0123456789abcdef"), "another store", id="other-store"),
        pytest.param({k: v for k, v in _document().items() if k != "store"}, "run `llmtap reconcile` again", id="old"),
        pytest.param(_document(provider="openai"), "another provider", id="other-provider"),
        pytest.param([1, 2], "not a reconcile result", id="a-list"),
        pytest.param(_document(since="yesterday"), "days are malformed", id="bad-day"),
        pytest.param(_document(made_at=5), "time is malformed", id="bad-time"),
        pytest.param(_document(rows=[]), "no rows", id="no-rows"),
        pytest.param(_document(rows=[_row()]), "totals row", id="no-totals"),
        pytest.param(_document(rows=[_row(model=7), _row(day="total")]), "model is not text", id="model-number"),
        pytest.param(_document(rows=[_row(provider_input_tokens="many"), _row(day="total")]), "whole number", id="tok"),
        pytest.param(_document(rows=[_row(llmtap_input_tokens=True), _row(day="total")]), "whole number", id="bool"),
        pytest.param(_document(rows=[_row(gap_usd="0.25"), _row(day="total")]), "not a number", id="money-text"),
        pytest.param(_document(rows=[_row(causes=["<script>"]), _row(day="total")]), "known causes", id="cause"),
        pytest.param(_document(rows=[_row(causes="batch"), _row(day="total")]), "known causes", id="causes-text"),
        pytest.param(_document(rows=["row"], made_at="2026-11-05"), "not an object", id="row-text"),
    ],
)
def test_a_bad_file_is_one_note_and_no_section(tmp_path: Path, document: Any, why: str) -> None:
    _write(tmp_path, document)
    loaded = saved.load_saved(tmp_path, STORE)
    assert loaded.saved == []
    (note,) = loaded.notes
    assert note.startswith("reconcile-anthropic.json: ") and why in note and "\n" not in note, note
    assert 'id="reconcile"' not in _section(loaded)


def test_nan_is_not_a_number(tmp_path: Path) -> None:
    text = json.dumps(_document()).replace('"gap_usd": 0.25', '"gap_usd": NaN', 1)
    assert "NaN" in text
    _write(tmp_path, text)
    (note,) = saved.load_saved(tmp_path, STORE).notes
    assert "not JSON" in note


def test_an_oversized_file_is_refused_unread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write(tmp_path, "")
    with open(path, "r+b") as handle:
        handle.truncate(saved.MAX_BYTES + 1)  # sparse: refused by its size, never parsed
    opened: list[int] = []
    real = os.fdopen
    monkeypatch.setattr(saved.os, "fdopen", lambda *a, **k: opened.append(1) or real(*a, **k))
    loaded = saved.load_saved(tmp_path, STORE)
    assert loaded.saved == [] and loaded.notes == ["reconcile-anthropic.json: larger than 4 MiB; not shown"]
    assert opened == []


def test_too_many_rows_is_a_note(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(saved, "MAX_ROWS", 3)
    _write(tmp_path, _document(rows=[_row()] * 3 + [_row(day="total")]))
    (note,) = saved.load_saved(tmp_path, STORE).notes
    assert "more than 3 rows" in note


def test_a_folder_or_a_link_in_its_place_is_a_note(tmp_path: Path) -> None:
    (tmp_path / "reconcile-anthropic.json").mkdir()
    target = _write(tmp_path / "elsewhere", _document(provider="openai"), "openai")
    (tmp_path / "reconcile-openai.json").symlink_to(target)
    loaded = saved.load_saved(tmp_path, STORE)
    assert loaded.saved == [] and len(loaded.notes) == 2


def test_one_store_file_beside_another_stores(tmp_path: Path) -> None:
    _write(tmp_path, _document())
    openai = _document(provider="openai", store="fedcba9876543210")
    openai["rows"] = [{**_row(), "project": "proj_1"}, _row(day="total")]
    _write(tmp_path, openai, "openai")
    loaded = saved.load_saved(tmp_path, STORE)
    assert [s.provider for s in loaded.saved] == ["anthropic"]
    assert loaded.notes == ["reconcile-openai.json: made for another store; not shown"]
    html = _section(loaded)
    assert 'data-provider="anthropic"' in html and 'data-provider="openai"' not in html


def test_the_store_identity_names_no_secret_and_one_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    one = saved.store_identity("postgresql+psycopg://alice:hunter2@db.example:5432/llmtap")
    assert one == saved.store_identity("postgresql+psycopg://bob:other@DB.example:5432/llmtap")
    assert one != saved.store_identity("postgresql+psycopg://alice:hunter2@db.example:5432/other")
    assert one != saved.store_identity("postgresql+psycopg://alice:hunter2@db.example:5433/llmtap")
    assert len(one) == 16 and int(one, 16) >= 0
    monkeypatch.chdir(tmp_path)
    assert saved.store_identity("sqlite:///store.db") == saved.store_identity(f"sqlite:///{tmp_path / 'store.db'}")
    assert saved.store_identity("sqlite:///store.db") != saved.store_identity(f"sqlite:///{tmp_path / 'other.db'}")
