"""The dashboard in a real headless Chromium: no console errors, every chart drawn with
data, hostile names shown as text; and the live server bound to 127.0.0.1."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.dashboards.conftest import HOSTILE_TEAM, serving
from tests.helpers import llmtap

ALL_CHARTS_SETTLED = (  # every chart drawn or marked empty
    "document.querySelectorAll('.chart[data-drawn]').length === document.querySelectorAll('.chart').length"
)


def open_page(browser, url: str, viewport: dict[str, int] | None = None):
    page = browser.new_page(viewport=viewport) if viewport else browser.new_page()
    problems: list[str] = []
    dialogs: list[str] = []
    page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.goto(url)
    page.wait_for_function(ALL_CHARTS_SETTLED, timeout=30000)
    return page, problems, dialogs


def test_file_opens_offline_with_every_chart_drawn(filled_store, browser, tmp_path: Path):
    url, env = filled_store
    output = tmp_path / "dashboard.html"
    assert llmtap("dashboard", "--db", url, "-o", str(output), env=env, process=True).code == 0
    html = output.read_text()
    assert "cdn" not in html.lower().split("<script>")[0]  # nothing fetched from elsewhere
    assert not re.search(r"<script[^>]+src=", html) and not re.search(r"<link[^>]+href=", html)
    assert HOSTILE_TEAM not in html  # only ever escaped
    assert "HARLEAKCANARY" not in html  # the HAR's planted API keys: never shown

    page, problems, dialogs = open_page(browser, output.as_uri())
    drawn = page.eval_on_selector_all(".chart", "nodes => nodes.map(n => [n.id, n.getAttribute('data-drawn')])")
    assert len(drawn) == 10
    assert [name for name, state in drawn if state != "chart"] == []
    for name, _ in drawn:  # a drawn chart has plotted marks: bars or points
        marks = page.locator(f"#{name} .trace .point, #{name} .trace path.js-line, #{name} .trace .bars path")
        assert marks.count() > 0, name
    assert problems == []
    assert dialogs == []
    cells = page.locator("#table-exchanges td", has_text=HOSTILE_TEAM)
    assert cells.count() > 0 and cells.first.text_content() == HOSTILE_TEAM
    axis = page.locator("#chart-tokens-team .xtick text").all_text_contents()
    assert HOSTILE_TEAM in axis
    assert page.locator("[data-total=requests]").text_content() == "49"
    page.close()


def test_served_live_on_loopback_and_refreshes(filled_store, browser):
    url, env = filled_store
    with serving(url, env) as served:
        assert served.token, "the store is 0600: the loopback server asks for a token"
        page, problems, _ = open_page(browser, served.first)
        assert page.locator(".live").count() == 1
        data = json.loads(served.fetch("data.json"))
        assert data["totals"]["requests"] == 49
        assert problems == []
        page.close()


def test_serve_refuses_a_port_in_use(filled_store):
    import socket

    url, env = filled_store
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        result = llmtap(
            "dashboard", "--serve", "--port", str(busy.getsockname()[1]), "--db", url, env=env, process=True
        )
    assert result.code == 2
    assert len(result.err.strip().splitlines()) == 1


def test_empty_store_draws_empty_charts_without_errors(browser, tmp_path: Path):
    import os

    env = dict(os.environ, LLMTAP_HOME=str(tmp_path / "home"))
    output = tmp_path / "empty.html"
    assert (
        llmtap("dashboard", "--db", f"sqlite:///{tmp_path / 'empty.db'}", "-o", str(output), env=env, process=True).code
        == 0
    )
    page, problems, _ = open_page(browser, output.as_uri())
    assert problems == []
    assert page.locator(".chart[data-drawn=empty]").count() == 10
    assert "No exchanges in this period." in page.locator("#table-exchanges").text_content()
    assert page.locator("#empty-state").text_content().startswith("No exchanges recorded yet")
    page.close()


@pytest.mark.parametrize("value", ["<img src=x onerror=alert(1)>", "</script><script>alert(2)</script>"])
def test_script_json_cannot_close_its_element(value: str):
    from llmtap.dashboards.page import script_json

    text = script_json({"team": value})
    assert "<" not in text and ">" not in text
    assert json.loads(text) == {"team": value}


def test_page_renders_every_script_and_the_data(filled_store):
    """How fast is bench/reports.py's (the dashboard render, at 100k and 1M exchanges)."""
    url, _ = filled_store
    from llmtap.dashboards import data, page

    collected = data.collect(url)
    html = page.render(collected, store=url)
    assert html.startswith("<!doctype html>")
    assert "var LlmtapVocabulary" in html  # the generated vocabulary, before the scripts that use it
    assert html.index("var LlmtapVocabulary") < html.index("LlmtapVocabulary;")
    assert collected["exchanges"], "the filled store shows no exchange"


def test_exchange_rows_open_details_and_conversations(filled_store, browser, tmp_path: Path):
    url, env = filled_store
    output = tmp_path / "dashboard.html"
    assert llmtap("dashboard", "--db", url, "-o", str(output), env=env, process=True).code == 0
    page, problems, dialogs = open_page(browser, output.as_uri())
    page.select_option("select[name=team]", HOSTILE_TEAM)
    rows = page.locator("#table-exchanges tbody tr")
    assert 0 < rows.count() < 49
    assert all(
        HOSTILE_TEAM == text for text in page.locator("#table-exchanges tbody td:nth-child(3)").all_text_contents()
    )
    page.select_option("select[name=team]", "")
    page.select_option("select[name=tool_problem]", "any")
    assert page.locator("#table-exchanges tbody tr").count() >= 1
    page.select_option("select[name=tool_problem]", "")
    page.fill("input[name=search]", "Paris")
    assert page.locator("#table-exchanges tbody tr").count() >= 1
    page.locator("#table-exchanges tbody tr").first.click()
    assert page.locator("#detail").is_visible()
    sections = page.locator("#detail-body h3").all_text_contents()
    assert {"Who and when", "Request", "Answer", "Usage", "Cost", "Cache"} <= set(sections)
    total = page.locator("#detail-body dt", has_text="total_usd").locator("xpath=following-sibling::dd[1]")
    assert total.text_content().startswith("$")
    assert "Paris" in page.locator("#detail-body pre").first.text_content()
    page.click("#detail-conversation")
    assert page.locator("#table-conversation tbody tr").count() >= 1
    assert "turns" in page.locator("#detail-body h3").first.text_content()
    assert problems == [] and dialogs == []
    page.close()


def test_served_pages_per_exchange_and_conversation(filled_store, browser):
    url, env = filled_store
    with serving(url, env) as served:
        base = served.base
        rows = json.loads(served.fetch("log.json?team=beta"))
        assert rows and {row["team"] for row in rows} == {"beta"}
        page, problems, dialogs = open_page(browser, served.first)
        page.locator("#table-exchanges tbody tr").first.click()
        href = page.locator("#detail-page").get_attribute("href")
        page.goto(base + href)  # the cookie the first page set carries the token
        assert page.locator("h2", has_text="Who").count() == 1
        page.click("text=The conversation this exchange belongs to")
        assert page.locator("#table-conversation tbody tr").count() >= 1
        page.goto(base)
        page.wait_for_function(ALL_CHARTS_SETTLED, timeout=30000)
        link = page.locator("#table-conversations tbody a").first  # the costliest conversation
        assert link.get_attribute("href").startswith("conversation/")
        link.click()
        assert page.locator("#table-conversation tbody tr").count() >= 1
        with pytest.raises(urllib.error.HTTPError) as missing:
            served.fetch("exchange/nope", timeout=30)
        assert missing.value.code == 404
        missing.value.close()  # its socket, else a ResourceWarning lands in whichever test runs the GC next
        assert problems == [] and dialogs == []
        page.close()


def test_served_dashboard_keeps_its_marks_after_two_refreshes(filled_store, browser):
    """Each refresh redraws every chart in place: none goes blank (the bug was a cleared
    chart node that Plotly.react then diffed against, drawing nothing, with no error)."""
    url, env = filled_store
    with serving(url, env) as served:
        page, problems, dialogs = open_page(browser, served.first)
        page.click("#exchanges .pager button[data-page=next]")  # a reader on page 2 stays there
        page.wait_for_function("Number(document.body.getAttribute('data-refreshes') || 0) >= 2", timeout=60000)
        drawn = page.eval_on_selector_all(".chart", "nodes => nodes.map(n => [n.id, n.getAttribute('data-drawn')])")
        assert len(drawn) == 10 and [name for name, state in drawn if state != "chart"] == []
        for name, _ in drawn:
            marks = page.locator(f"#{name} .trace .point, #{name} .trace path.js-line, #{name} .trace .bars path")
            assert marks.count() > 0, name
        assert page.locator("#table-exchanges tbody tr").count() == 24  # the second page of the 49
        assert page.locator("#exchanges .pager .where").text_content() == "rows 26–49 of 49 · page 2 of 2"
        assert problems == [] and dialogs == []
        page.close()


def test_page_formats_money_and_percent_as_the_cli_does(browser, tmp_path: Path):
    """format.js's money() and percent() against analytics.render's, value by value."""
    import os
    import random
    from decimal import Decimal

    from llmtap.analytics.render import money, percent

    env = dict(os.environ, LLMTAP_HOME=str(tmp_path / "home"))
    output = tmp_path / "empty.html"
    assert (
        llmtap("dashboard", "--db", f"sqlite:///{tmp_path / 'e.db'}", "-o", str(output), env=env, process=True).code
        == 0
    )
    page, problems, _ = open_page(browser, output.as_uri())
    r = random.Random(14)
    amounts = ["0", "0.00", "1", "0.99996", "0.99994", "1234.5", "1234567.891", "999.995", "0.012345", "0.00045"]
    amounts += ["-2.5", "-0.0123456", "0.000000000001", "1E-7", "5E+3", "12.345", "0.10005", "0.000000006765"]
    amounts += [str(Decimal(r.randrange(10**13)).scaleb(-r.randrange(17))) for _ in range(500)]
    ratios = [0, 1, 0.7467, 0.5, 0.12345, 0.0005, 0.00049, 0.1225, 0.1275, 0.99951, 0.0025, 2 / 3]
    ratios += [r.random() for _ in range(300)] + [r.randrange(4001) / 4000 for _ in range(300)]
    shown = page.evaluate(
        "([a, p]) => [a.map(v => LlmtapFormat.money(v)), p.map(v => LlmtapFormat.percent(v))]", [amounts, ratios]
    )
    assert shown[0] == [money(Decimal(a)) for a in amounts]
    assert shown[1] == [percent(p) for p in ratios]
    assert problems == []
    page.close()
