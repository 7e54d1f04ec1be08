"""How the dashboard reads at 1, 30 and 365 days of synthetic traffic (25 teams), in a
real headless Chromium: every chart has marks, no legend covers an axis label, counts
tick at whole numbers, a day is drawn per hour (whole-hour ticks) and a year per week, a
category has one colour on every chart (errors red, natural stops neutral), the hit rate
is a line per team, and every cost shown has its `$`. (docs/'s pictures: test_truthful.py.)

Not responsible for the corpus store's content or for serving (test_dashboard.py).
"""

from __future__ import annotations

import re
from datetime import date

import pytest

from tests.dashboards.test_dashboard import open_page
from tests.helpers import llmtap

COUNT_CHARTS = ("chart-miss-causes", "chart-finish", "chart-tools", "chart-errors")
TIME_CHARTS = ("chart-tokens-day", "chart-cost-day", "chart-hit-rate")

# Each chart's legend box, and every axis label box, in page pixels.
BOXES = """() => Array.from(document.querySelectorAll('.chart[data-drawn=chart]')).map(node => {
  const box = el => { const r = el.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  const legend = node.querySelector('.legend');
  const labels = Array.from(node.querySelectorAll('.xtick text, .ytick text, .g-xtitle text, .g-ytitle text'));
  return { id: node.id, legend: legend ? box(legend.querySelector('.bg') || legend) : null,
           labels: labels.map(l => [l.textContent, box(l)]),
           plot: box(node.querySelector('.nsewdrag') || node) };
})"""


def overlap(a: list[float], b: list[float]) -> bool:
    return a[0] < b[2] - 1 and b[0] < a[2] - 1 and a[1] < b[3] - 1 and b[1] < a[3] - 1


@pytest.fixture(scope="module", params=[1, 30, 365], ids=lambda days: f"{days}d")
def shown(request, synthetic_store, browser, tmp_path_factory):
    days = request.param
    url, env = synthetic_store(days)
    output = tmp_path_factory.mktemp(f"page-{days}d") / "dashboard.html"
    assert llmtap("dashboard", "--db", url, "-o", str(output), env=env, process=True).code == 0
    page, problems, dialogs = open_page(browser, output.as_uri(), viewport={"width": 1440, "height": 900})
    yield days, page, problems + dialogs
    page.close()


def test_every_chart_has_marks_and_no_errors(shown):
    _, page, problems = shown
    drawn = page.eval_on_selector_all(".chart", "nodes => nodes.map(n => [n.id, n.getAttribute('data-drawn')])")
    assert len(drawn) == 10  # tests/dashboards/test_dashboard.py counts the same charts
    assert [name for name, state in drawn if state != "chart"] == []
    for name, _ in drawn:
        marks = page.locator(f"#{name} .trace .point, #{name} .trace path.js-line, #{name} .trace .bars path")
        assert marks.count() > 0, name
    assert problems == []


def test_no_legend_covers_a_label_or_the_plot(shown):
    days, page, _ = shown
    charts = page.evaluate(BOXES)
    legends = [chart for chart in charts if chart["legend"] is not None]
    assert legends, (days, [chart["id"] for chart in charts])
    for chart in legends:
        assert not overlap(chart["legend"], chart["plot"]), (days, chart["id"])
        covered = [text for text, box in chart["labels"] if overlap(chart["legend"], box)]
        assert covered == [], (days, chart["id"], covered)


def test_counts_tick_at_whole_numbers(shown):
    _, page, _ = shown
    for chart in COUNT_CHARTS:
        ticks = [t.replace(",", "") for t in page.locator(f"#{chart} .ytick text").all_text_contents()]
        assert ticks and all(re.fullmatch(r"\d+", t) for t in ticks), (chart, ticks)
        assert len(set(ticks)) == len(ticks), (chart, ticks)


def test_a_year_is_drawn_per_week(shown):
    days, page, _ = shown
    period = "week" if days > 60 else "day" if days > 2 else "hour"
    assert set(page.locator("[data-period]").all_text_contents()) == {period}
    xs = page.evaluate("() => document.getElementById('chart-tokens-day').data[0].x")
    assert 1 < len(xs) <= {"week": days // 7 + 2, "day": days + 1, "hour": days * 24 + 1}[period]
    for chart in ("chart-tokens-day", "chart-cost-day"):  # a bar per period, never a hairline
        widths = [box["width"] for box in (bar.bounding_box() for bar in page.locator(f"#{chart} .bars path").all())]
        assert widths and min(w for w in widths if w > 0) > 3, (chart, min(widths))


def test_one_colour_per_category_on_every_chart(shown):
    _, page, _ = shown
    colours = page.evaluate(
        """() => Object.fromEntries(['chart-finish', 'chart-tools', 'chart-errors', 'chart-cost-day', 'chart-hit-rate']
        .map(id => [id, document.getElementById(id).data.map(t => [t.name, t.marker.color])]))"""
    )
    finish = dict(colours["chart-finish"])
    red = ("#d92d20", "#f63d68", "#fea3b4", "#c4320a", "#9e2a12", "#5c1a0b")  # finish `error`, HTTP 4xx, 5xx
    if "error" in finish:
        assert finish["error"] in red
    assert finish.get("tool_use", "#1849a9") not in red and finish.get("end_turn", "#2e90fa") not in red
    assert colours["chart-errors"] and all(colour in red for _, colour in colours["chart-errors"])  # 4xx, 5xx: reds
    teams_cost, teams_hit = dict(colours["chart-cost-day"]), dict(colours["chart-hit-rate"])
    assert len(teams_hit) > 1  # one line per team
    assert {t: teams_cost[t] for t in teams_hit if t in teams_cost} == {
        t: c for t, c in teams_hit.items() if t in teams_cost
    }


def test_every_cost_has_its_dollar(shown):
    _, page, _ = shown
    assert page.locator("[data-total=cost_usd]").text_content().startswith("$")
    for table, heading in (
        ("table-conversations", "cost"),
        ("table-exchanges", "cost"),
        ("table-misses", "extra cost"),
    ):
        column = page.locator(f"#{table} thead th").all_text_contents().index(heading) + 1
        cells = page.locator(f"#{table} tbody td:nth-child({column})").all_text_contents()
        assert cells, table
        assert all(c.startswith("$") or c in ("unpriced", "no usage", "") for c in cells), (table, cells[:5])
    ticks = page.locator("#chart-cost-team .ytick text").all_text_contents()
    assert ticks and all(t.startswith("$") for t in ticks)


def test_weeks_and_other_teams_add_up_to_the_total(synthetic_store):
    """A year per week, the quiet teams summed into one: not a cent or a token lost."""
    from decimal import Decimal

    from llmtap.dashboards import data

    url, _ = synthetic_store(365)
    d = data.collect(url)
    assert d["period"] == "week"
    assert len({r["team"] for r in d["cost_by_day_team"]}) == data.TEAMS_SHOWN + 1
    weekly = sum(Decimal(r["cost_usd"]) for r in d["cost_by_day_team"] if r["cost_usd"] is not None)
    assert weekly == Decimal(d["totals"]["cost_usd"]) > 0
    assert sum(r["input_tokens"] for r in d["cache_by_day_team"]) == d["totals"]["input_tokens"]
    assert sum(r["requests"] for r in d["usage_by_day"]) == d["totals"]["requests"]
    assert len(d["usage_by_day"]) > 40
    assert all(date.fromisoformat(r["day"]).weekday() == 0 for r in d["usage_by_day"])


def test_hours_add_up_to_the_total(synthetic_store):
    """A day per hour: the keys are UTC hours, and not a cent or a token lost."""
    from decimal import Decimal

    from llmtap.dashboards import data

    url, _ = synthetic_store(1)
    d = data.collect(url)
    assert d["period"] == "hour"
    for name in ("usage_by_day", "cost_by_day_team", "cache_by_day_team"):
        assert d[name] and all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:00", r["day"]) for r in d[name]), name
        assert all("hour" not in r for r in d[name]), name
    assert len({r["day"] for r in d["usage_by_day"]}) > 12
    hourly = sum(Decimal(r["cost_usd"]) for r in d["cost_by_day_team"] if r["cost_usd"] is not None)
    assert hourly == Decimal(d["totals"]["cost_usd"]) > 0
    assert sum(r["input_tokens"] for r in d["cache_by_day_team"]) == d["totals"]["input_tokens"]
    assert sum(r["requests"] for r in d["usage_by_day"]) == d["totals"]["requests"]


@pytest.mark.parametrize("shown", [1], indirect=True, ids=["1d"])  # per day or per week past 2 days
def test_a_day_is_drawn_per_hour(shown, synthetic_store):
    """At one day, each time chart has a bar (or point) per hour with traffic, as
    `report usage --by hour` counts them, and hour ticks a person can read."""
    days, page, _ = shown
    assert days == 1
    url, env = synthetic_store(days)
    result = llmtap("report", "usage", "--by", "hour", "--format", "json", "--db", url, env=env)
    assert result.code == 0, result.err
    hours = {r["hour"] for r in result.json()}
    assert len(hours) > 1
    for chart in TIME_CHARTS:
        xs = page.evaluate(f"() => document.getElementById('{chart}').data.flatMap(t => t.x)")
        assert set(xs) == hours, chart
        ticks = page.locator(f"#{chart} .xtick text").all_text_contents()
        assert len(ticks) > 2, (chart, ticks)
        # "00:00" over "Dec 1" (two lines, one text) first and at midnight, then "06:00", …:
        # whole hours, never seconds or less
        assert all(re.fullmatch(r"\d\d:00([A-Z][a-z]{2} \d{1,2})?", t) for t in ticks), (chart, ticks)
        assert re.fullmatch(r"\d\d:00[A-Z][a-z]{2} \d{1,2}", ticks[0]), (chart, ticks)
        assert len(set(ticks)) == len(ticks), (chart, ticks)
    for chart in ("chart-tokens-day", "chart-cost-day"):  # a column of bars per hour, each visibly wide
        boxes = [box for box in (bar.bounding_box() for bar in page.locator(f"#{chart} .bars path").all()) if box]
        drawn = [box for box in boxes if box["width"] > 0]
        assert drawn and min(box["width"] for box in drawn) > 3, chart
        assert len({round(box["x"]) for box in drawn}) == len(hours), chart


def test_the_period_follows_the_span_shown(synthetic_store):
    """Two days out of thirty are drawn per hour, three per day: the span is that of the
    exchanges shown (`--since`/`--until`), not of the store."""
    from datetime import datetime, timedelta

    from llmtap.dashboards import data

    url, _ = synthetic_store(30)
    middle = datetime.fromisoformat(data.collect(url)["usage_by_day"][15]["day"])
    two = data.collect(url, since=middle, until=middle + timedelta(days=2))
    assert two["period"] == "hour" and len(two["usage_by_day"]) > 24
    assert min(r["day"] for r in two["usage_by_day"]) >= middle.strftime("%Y-%m-%d %H:00")
    assert data.collect(url, since=middle, until=middle + timedelta(days=3))["period"] == "day"
