"""What a billing reader sees is what the reports say (issue 26), in a real headless
Chromium: an unpriced team is labelled, never an empty $0 bar; 25 teams are the 8
busiest and one "other", each its own colour that nothing else on the page uses; the
header names the period and the zone the days are counted in; an empty period says so
and when the last exchange was, with no $0 and no 0.0%; not-cacheable turns are counted
apart from the misses, as `report cache` counts them; tables fit at 1,024 and 1,400 px
and page past 500 rows; the served exchange page reads as `show` does, not as JSON.

Not responsible for the charts' axes and legends (test_layout.py) nor for who the server
answers (test_serve_access.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.dashboards.conftest import serving
from tests.dashboards.test_dashboard import open_page
from tests.helpers import llmtap

UNPRICED_TEAM = "research-lab"


@pytest.fixture(scope="module")
def with_unpriced_team(synthetic_store, tmp_path_factory):
    """make(days) -> (url, env): the synthetic store over `days` (25 teams) with one more
    team whose every exchange is of the model that has no price."""
    made: dict[int, tuple[str, dict[str, str]]] = {}

    def make(days: int) -> tuple[str, dict[str, str]]:
        if days in made:
            return made[days]
        url, env = synthetic_store(days)
        path = tmp_path_factory.mktemp(f"unpriced-{days}d") / "store.db"
        shutil.copy(url.removeprefix("sqlite:///"), path)
        with sqlite3.connect(path) as db:
            (model,) = db.execute(
                "SELECT model FROM exchanges WHERE price_status = 'unpriced' GROUP BY model ORDER BY count(*) DESC"
            ).fetchone()
            ids = "SELECT id FROM exchanges WHERE model = ?"
            db.execute(f"UPDATE exchange_facts SET team = ? WHERE id IN ({ids})", (UNPRICED_TEAM, model))
            db.execute("UPDATE exchanges SET team = ? WHERE model = ?", (UNPRICED_TEAM, model))
        path.chmod(0o600)
        made[days] = (f"sqlite:///{path}", env)
        return made[days]

    return make


@pytest.fixture(scope="module")
def unpriced_store(with_unpriced_team):
    return with_unpriced_team(30)


def written(url: str, env: dict[str, str], folder: Path, *args: str) -> Path:
    output = folder / "dashboard.html"
    result = llmtap("dashboard", "--db", url, "-o", str(output), *args, env=env, process=True)
    assert result.code == 0, result.err
    return output


def report(url: str, env: dict[str, str], *args: str) -> list[dict]:
    result = llmtap("report", *args, "--format", "json", "--db", url, env=env)
    assert result.code == 0, result.err
    return result.json()


@pytest.fixture(scope="module")
def unpriced_page(unpriced_store, browser, tmp_path_factory):
    url, env = unpriced_store
    output = written(url, env, tmp_path_factory.mktemp("page"))
    page, problems, dialogs = open_page(browser, output.as_uri(), viewport={"width": 1400, "height": 900})
    yield page
    assert problems == [] and dialogs == []
    page.close()


def test_an_unpriced_team_is_labelled_not_a_zero_bar(unpriced_store, unpriced_page):
    url, env = unpriced_store
    (team,) = [r for r in report(url, env, "cost", "--by", "team") if r["team"] == UNPRICED_TEAM]
    assert team["cost_usd"] is None and team["unpriced"] > 0
    chart = unpriced_page.evaluate(
        """() => { const n = document.getElementById('chart-cost-team');
        return { x: n.data[0].x, y: n.data[0].y, notes: (n.layout.annotations || []).map(a => [a.x, a.text]) }; }"""
    )
    at = chart["x"].index(UNPRICED_TEAM)
    assert chart["y"][at] is None  # no bar at all, not a bar of $0
    assert [UNPRICED_TEAM, f"unpriced: {team['unpriced']:,} requests"] in chart["notes"]
    drawn = unpriced_page.locator("#chart-cost-team .annotation-text").all_text_contents()
    assert f"unpriced: {team['unpriced']:,} requests" in drawn
    # the cost card's total says what it leaves out, as `report cost` does
    unpriced = sum(r["unpriced"] for r in report(url, env, "cost", "--by", "team"))
    note = unpriced_page.locator("[data-total-note=unpriced]").text_content()
    assert f"+ {unpriced:,} unpriced requests, not in the total" in note
    assert UNPRICED_TEAM in unpriced_page.locator("#note-cost-day").text_content()


def test_many_teams_are_the_busiest_and_other_each_its_own_colour(unpriced_page):
    charts = unpriced_page.evaluate(
        """() => Object.fromEntries(Array.from(document.querySelectorAll('.chart[data-drawn=chart]')).map(n =>
        [n.id, n.data.map(t => [t.name, Array.isArray(t.marker.color) ? t.marker.color : [t.marker.color],
                                 Array.isArray(t.x) ? t.x : []])]))"""
    )
    teams = {name: colours[0] for name, colours, _ in charts["chart-hit-rate"]}
    assert len(teams) == 9 and "(18 other teams)" in teams  # 26 teams: 8 and the other 18
    assert len(set(teams.values())) == 9  # no colour repeats
    cost = {name: colours[0] for name, colours, _ in charts["chart-cost-day"]}
    assert cost == {t: c for t, c in teams.items() if t != UNPRICED_TEAM}  # nothing priced: nothing drawn
    _, bar_colours, bar_teams = charts["chart-cost-team"][0]
    assert dict(zip(bar_teams, bar_colours, strict=True)) == teams
    team_charts = ("chart-cost-day", "chart-hit-rate", "chart-cost-team")
    others = {c for chart, traces in charts.items() if chart not in team_charts for _, cs, _ in traces for c in cs}
    assert others and not others & set(teams.values())  # a team's colour means nothing else
    palette = unpriced_page.evaluate("() => LlmtapFormat.palette()")
    assert {colour: meanings for colour, meanings in palette.items() if len(meanings) > 1} == {}


def test_not_cacheable_is_counted_apart_from_misses(unpriced_store, unpriced_page):
    url, env = unpriced_store
    cache = report(url, env, "cache", "--by", "team")
    misses, not_cacheable = sum(r["misses"] for r in cache), sum(r["not_cacheable"] for r in cache)
    assert misses > 0 and not_cacheable > 0
    traces = unpriced_page.evaluate(
        "() => document.getElementById('chart-miss-causes').data.map(t => [t.name, t.y, t.marker.color])"
    )
    drawn = {name: sum(y) for name, y, _ in traces}
    assert drawn.pop("not cacheable") == not_cacheable
    assert "below_minimum" not in drawn and sum(drawn.values()) == misses
    colours = {name: colour for name, _, colour in traces}
    assert list(colours.values()).count(colours["not cacheable"]) == 1
    causes = unpriced_page.locator("#table-misses tbody td:nth-child(4)").all_text_contents()
    assert causes and "below_minimum" not in causes
    card = unpriced_page.locator("[data-total-note=misses]").text_content()
    assert card == f"{misses:,} misses · {not_cacheable:,} not cacheable"


def test_tables_page_past_five_hundred_rows(unpriced_page):
    page = unpriced_page
    rows = page.locator("#table-exchanges tbody tr")
    assert rows.count() == 25
    pager = page.locator("#exchanges .pager .where")
    assert pager.text_content() == "rows 1–25 of 2,000 · page 1 of 80"
    assert "the newest 2,000 of 3,000" in page.locator("#exchange-count").text_content()
    first = rows.first.get_attribute("data-id")
    page.select_option("#exchanges .pager select[name=page-size]", "500")
    assert rows.count() == 500 and rows.first.get_attribute("data-id") == first
    page.click("#exchanges .pager button[data-page=next]")
    assert pager.text_content() == "rows 501–1,000 of 2,000 · page 2 of 4"
    page.click("#exchanges .pager button[data-page=last]")
    assert pager.text_content() == "rows 1,501–2,000 of 2,000 · page 4 of 4"
    assert rows.count() == 500 and rows.first.get_attribute("data-id") != first
    shown = set(rows.evaluate_all("rows => rows.map(r => r.getAttribute('data-id'))"))
    assert len(shown) == 500
    rows.first.click()  # a row of a later page still opens its own detail
    assert page.locator("#detail").is_visible()
    assert page.locator("#detail-title").text_content() == rows.first.get_attribute("data-id")
    page.click("#detail-close")
    page.click("#exchanges .pager button[data-page=first]")
    assert rows.first.get_attribute("data-id") == first


@pytest.mark.parametrize("width", [1024, 1400])
def test_no_sideways_scroll(unpriced_store, filled_store, browser, tmp_path, width):
    """Neither the page nor any table scrolls sideways: long names, ids and prose fit."""
    for url, env in (unpriced_store, filled_store):
        output = written(url, env, tmp_path)
        page, problems, _ = open_page(browser, output.as_uri(), viewport={"width": width, "height": 900})
        assert page.evaluate("document.scrollingElement.scrollWidth <= innerWidth")
        wide = page.evaluate(
            """() => Array.from(document.querySelectorAll('.table-wrap')).filter(w => w.scrollWidth > w.clientWidth)
            .map(w => w.querySelector('table').id)"""
        )
        assert wide == [], (url, width)
        page.locator("#table-exchanges tbody tr").first.click()
        page.click("#detail-conversation")
        assert page.evaluate("document.scrollingElement.scrollWidth <= innerWidth")
        assert problems == []
        page.close()


def test_an_empty_period_says_so_and_when_the_last_was(unpriced_store, browser, tmp_path):
    url, env = unpriced_store
    output = written(url, env, tmp_path, "--since", "2030-01-01", "--tz", "Asia/Tokyo")
    page, problems, _ = open_page(browser, output.as_uri())
    banner = page.locator("#empty-state")
    assert banner.is_visible()
    last = max(r["hour"] for r in report(url, env, "usage", "--by", "hour", "--tz", "Asia/Tokyo"))
    assert re.fullmatch(
        r"No exchanges in this period\. The last exchange recorded was at (\S+ \S+) \(Asia/Tokyo\)\.",
        banner.text_content(),
    )
    assert banner.text_content().split(" at ")[1][:13] == last[:13]
    shown = page.locator("header").inner_text() + page.locator("main").inner_text()
    assert "$0" not in shown and "0.0%" not in shown and "No data yet" not in shown
    assert page.locator("[data-total=hit_rate]").text_content() == "—"
    assert page.locator(".chart[data-drawn=empty]").first.text_content() == "No exchanges in this period."
    assert problems == []
    page.close()


def test_the_header_names_the_period_and_zone(unpriced_store, browser, tmp_path):
    """Days counted in the zone asked for (as `report --by day --tz`), and said so."""
    url, env = unpriced_store
    output = written(url, env, tmp_path, "--tz", "Pacific/Auckland", "--since", "2026-10-10", "--until", "2026-10-20")
    page, problems, _ = open_page(browser, output.as_uri())
    assert page.locator("#period").text_content() == (
        "Period: 2026-10-10 13:00 to 2026-10-20 13:00 · times in Pacific/Auckland · per day"
    )
    days = report(url, env, "usage", "--by", "day", "--tz", "Pacific/Auckland", "--since", "2026-10-10", "--until",
                  "2026-10-20")  # fmt: skip
    xs = page.evaluate("() => document.getElementById('chart-tokens-day').data[0].x")
    assert xs == [r["day"] for r in days]
    assert "when (Pacific/Auckland)" in page.locator("#table-exchanges thead").text_content()
    assert problems == []
    page.close()
    bad = llmtap("dashboard", "--db", url, "--tz", "Mars/Olympus", "-o", str(tmp_path / "x.html"), env=env)
    assert bad.code == 2 and len(bad.err.strip().splitlines()) == 1 and "Mars/Olympus" in bad.err


def test_served_exchange_page_reads_as_show_not_json(unpriced_store, browser):
    url, env = unpriced_store
    with serving(url, env) as served:
        rows = json.loads(served.fetch("log.json?tool_problem=any"))
        exchange = next(r for r in rows if r["detail"]["cost"].get("total_usd") is not None)
        page, problems, _ = open_page(browser, served.first)
        page.goto(served.base + "exchange/" + exchange["id"])
        text = page.evaluate(
            """() => { const copy = document.querySelector('main').cloneNode(true);
            copy.querySelectorAll('details.raw, pre').forEach(n => n.remove()); return copy.innerText; }"""
        )
        assert not re.search(r'[{\[]"|":|"\d{4}-\d\d-\d\d', text), text  # no JSON: no quoted keys or times
        pairs = dict(
            zip(
                page.locator("dl.pairs dt").all_text_contents(),
                page.locator("dl.pairs dd").all_text_contents(),
                strict=True,
            )
        )
        assert pairs["times in"] == "UTC" and re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}", pairs["started"])
        assert pairs["total"].startswith("$") and pairs["status"] == "priced"
        assert page.locator("ul.parts li").first.text_content().startswith("tokens ")
        statuses = page.locator("section:has(h2:text-matches('^Tool call')) dd.bad").all_text_contents()
        assert statuses  # a tool call's problem, said as its status
        titles = page.locator("main h2").all_text_contents()
        assert titles.index("Who") < titles.index("When") < titles.index("Answer") < titles.index("Cost")
        page.goto(served.base + "conversation/" + exchange["id"])
        cells = page.locator("#table-conversation tbody td:nth-child(8)").all_text_contents()
        assert cells and all(c.startswith("$") or c == "unpriced" for c in cells)
        assert page.evaluate("document.scrollingElement.scrollWidth <= innerWidth")
        assert problems == []
        page.close()


@pytest.mark.skipif(not os.environ.get("LLMTAP_SCREENSHOTS"), reason="LLMTAP_SCREENSHOTS=DIR makes docs/'s pictures")
@pytest.mark.parametrize("days", [1, 30, 365])
def test_screenshots(with_unpriced_team, browser, tmp_path, days):
    """`LLMTAP_SCREENSHOTS=docs pytest tests/dashboards/test_truthful.py -k screenshots`:
    the file at 1, 30 and 365 days (26 teams, one of them unpriced) whole, the served one
    as a browser opens it, and at 30 days a served exchange page; and the demo's page."""
    folder = Path(os.environ["LLMTAP_SCREENSHOTS"])
    url, env = with_unpriced_team(days)
    output = written(url, env, tmp_path)
    viewport = {"width": 1440, "height": 900}
    page, problems, _ = open_page(browser, output.as_uri(), viewport=viewport)
    page.screenshot(path=str(folder / f"dashboard-{days}d.png"), full_page=True)
    page.close()
    with serving(url, env) as served:
        page, more, _ = open_page(browser, served.first, viewport=viewport)
        page.screenshot(path=str(folder / f"dashboard-served-{days}d.png"))
        if days == 30:
            rows = json.loads(served.fetch("log.json?tool_problem=any"))
            page.goto(served.base + "exchange/" + rows[0]["id"])
            page.screenshot(path=str(folder / "dashboard-exchange.png"), full_page=True)
        page.close()
    if days == 1:
        demo = tmp_path / "demo"
        assert llmtap("demo", "--dir", str(demo), env=env, process=True).code == 0
        page, demo_problems, _ = open_page(browser, (demo / "llmtap-dashboard.html").as_uri(), viewport=viewport)
        page.screenshot(path=str(folder / "dashboard.png"))
        page.close()
        problems += demo_problems
    assert problems == [] and more == []
