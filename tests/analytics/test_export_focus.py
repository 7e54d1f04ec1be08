"""`llmtap export --format focus` (SPEC §3): FOCUS 1.2 rows in CSV, one per exchange ×
token class or fee, on the corpus and the billing fixtures (fees, an advisor's sub-usage,
audio tokens, Bedrock and Azure) imported into SQLite and PostgreSQL, with a call to a
host nobody vouches for (unpriced). BilledCost adds up to `report cost`'s total to the
pico-dollar, in all, per team and under `--team`, `--since` and `--until`; the token
columns add up to the report's; unpriced charges cost 0 and say so; no text cell is a
formula; and, when LLMTAP_FOCUS_VALIDATOR names focus-validator's script (.ci/run sets
it), the FOCUS Foundation's validator passes the file.

Not responsible for the prices (test_cost.py, test_billing_*.py) or the other formats
(test_export_money.py)."""

from __future__ import annotations

import copy
import csv
import io
import json
import os
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from llmtap.analytics.focus_rows import COLUMNS, csv_line, focus_rows
from tests.analytics.conftest import BACKENDS, blank_database
from tests.corpus_tools import CORPUS, HAR_START, HAR_STEP, TESTS, make_har
from tests.focus_verdict import failures, package_folder, rule_model
from tests.helpers import llmtap

pytestmark = pytest.mark.timeout(300)

BILLING = TESTS / "fixtures" / "billing"
TEAMS = ("alpha", '=HYPERLINK("http://evil.example/","x")', "@SUM(1)", "-2+3")
FORMULA_START = ("=", "+", "-", "@")
MONEY = ("BilledCost", "EffectiveCost", "ListCost", "ContractedCost")
VALIDATOR = os.environ.get("LLMTAP_FOCUS_VALIDATOR", "").strip()


def _har(folder: Path) -> Path:
    """The corpus, then the billing fixtures an hour on, then a Chat call to a host that
    no price list vouches for."""
    entries: list[dict[str, Any]] = []
    for offset, source in enumerate((CORPUS, BILLING)):
        part = folder / f"{source.name}.har"
        make_har(source, part, teams=TEAMS)
        for entry in json.loads(part.read_text())["log"]["entries"]:
            moment = datetime.fromisoformat(entry["startedDateTime"].replace("Z", "+00:00"))
            entry["startedDateTime"] = (moment + offset * 24 * HAR_STEP).isoformat().replace("+00:00", "Z")
            entries.append(entry)
    chat = next(
        e for e in entries if e["request"]["url"].endswith("/chat/completions") and e["response"]["status"] == 200
    )
    unverified = copy.deepcopy(chat)
    unverified["request"]["url"] = "https://llm.internal.example/v1/chat/completions"
    unverified["startedDateTime"] = (HAR_START + 200 * HAR_STEP).isoformat().replace("+00:00", "Z")
    entries.append(unverified)
    har = folder / "all.har"
    har.write_text(
        json.dumps({"log": {"version": "1.2", "creator": {"name": "t", "version": "1"}, "entries": entries}})
    )
    return har


@pytest.fixture(scope="module", params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp(f"focus-{request.param}")
    har = _har(folder)
    with blank_database(request.param, folder) as url:
        result = llmtap("import", str(har), "--db", url)
        assert result.code == 0, result.err
        yield url


def export(url: str, folder: Path, *args: str) -> tuple[list[dict[str, str]], str]:
    target = folder / "focus.csv"
    result = llmtap("export", "--format", "focus", "-o", str(target), *args, "--db", url)
    assert result.code == 0, result.err
    assert " FOCUS row" in result.err
    text = target.read_text(encoding="utf-8")
    return list(csv.DictReader(io.StringIO(text, newline=""))), text


def report_cost(url: str, *args: str) -> list[dict[str, Any]]:
    result = llmtap("report", "cost", "--by", "team", *args, "--format", "json", "--db", url)
    assert result.code == 0, result.err
    return result.json()


def total(rows: list[dict[str, Any]], name: str) -> Decimal:
    return sum((Decimal(str(r[name])) for r in rows if r.get(name) not in (None, "")), Decimal(0))


def team_of(row: dict[str, str]) -> str:
    team = row["x_Team"]
    return team[1:] if team.startswith("'") and team[1:].startswith(FORMULA_START) else team


@pytest.mark.parametrize(
    "args",
    [
        (),
        ("--team", "alpha"),
        ("--team", "@SUM(1)"),
        ("--since", "2026-11-02T12:00:00Z"),
        ("--until", "2026-11-02T12:00:00Z"),
    ],
    ids=lambda args: " ".join(args) or "all",
)
def test_billed_cost_sums_to_report_cost(store, tmp_path, args):
    rows, _ = export(store, tmp_path, *args)
    report = report_cost(store, *args) if "--team" not in args else report_cost(store)
    if "--team" in args:  # the report's row for that team (report cost takes no --team)
        report = [line for line in report if line["team"] == args[1]]
    assert rows and report
    assert total(rows, "BilledCost") == total(report, "cost_usd") > 0
    for name in MONEY[1:]:
        assert total(rows, name) == total(rows, "BilledCost"), name
    for line in report:
        mine = [row for row in rows if team_of(row) == line["team"]]
        assert total(mine, "BilledCost") == Decimal(str(line["cost_usd"])), line["team"]


def test_rows_are_charges_with_their_tokens(store, tmp_path):
    rows, _ = export(store, tmp_path)
    report = report_cost(store)
    kinds = {row["x_ChargeType"] for row in rows}
    assert {"input", "cache_read", "cache_write", "output", "fee"} <= kinds
    for column, metric in (
        ("x_CacheReadTokens", "cache_read_tokens"),
        ("x_CacheWriteTokens", "cache_write_tokens"),
        ("x_OutputTokens", "output_tokens"),
        ("x_ReasoningTokens", "reasoning_tokens"),
    ):
        assert total(rows, column) == total(report, metric), column
    inputs = total(rows, "x_InputTokens") + total(rows, "x_CacheReadTokens") + total(rows, "x_CacheWriteTokens")
    assert inputs == total(report, "input_tokens")
    for row in rows:
        assert row["SkuId"] == f"{row['x_Model']}:{row['x_ChargeType']}"
        assert row["SkuPriceId"].startswith(row["SkuId"])
        assert row["ChargePeriodStart"].endswith(":00:00Z") and row["BillingPeriodStart"].endswith("-01T00:00:00Z")
        price, quantity, cost = (Decimal(row[n]) for n in ("ListUnitPrice", "PricingQuantity", "ListCost"))
        assert abs(price * quantity - cost) < Decimal("1e-20"), row
        for name in (*MONEY, "ListUnitPrice", "PricingQuantity", "ConsumedQuantity"):
            assert "." in row[name], (name, row[name])  # read as a decimal, not an integer
        token_columns = [n for n in ("x_InputTokens", "x_CacheReadTokens", "x_CacheWriteTokens") if row[n]]
        if row["x_ChargeType"] in ("input", "cache_read", "cache_write"):
            assert len(token_columns) == 1 and Decimal(row[token_columns[0]]) == quantity
        if row["x_ChargeType"] == "fee":
            assert row["PricingUnit"] == "Requests" and Decimal(row["BilledCost"]) > 0
            assert "web_search x " in row["ChargeDescription"]
        json.loads(row["Tags"])
    unpriced = [row for row in rows if row["x_PriceStatus"] == "unpriced"]
    assert unpriced and all(Decimal(row["BilledCost"]) == 0 for row in unpriced)
    assert {row["x_PriceReason"] for row in unpriced} == {"unverified_host"}
    assert {row["x_PriceStatus"] for row in rows} <= {"priced", "unpriced"}  # usage missing: no charge


def test_no_text_cell_is_a_formula(store, tmp_path):
    _, text = export(store, tmp_path)
    teams = set()
    reader = csv.reader(io.StringIO(text, newline=""))
    assert tuple(next(reader)) == COLUMNS
    for cells in reader:
        for cell in cells:
            if cell.startswith(FORMULA_START):
                Decimal(cell)  # a number (a negative one) may start with "-"; no text does
        teams.add(cells[COLUMNS.index("x_Team")])
    assert "'@SUM(1)" in teams and "'-2+3" in teams


def _row(**changes: Any) -> dict[str, Any]:
    usage = {"input_tokens": 100, "cache_read_tokens": 40, "cache_write_tokens": 0, "output_tokens": 7}
    row: dict[str, Any] = {
        "id": "01EXCHANGE",
        "conversation_id": "01EXCHANGE",
        "team": "alpha",
        "key_fingerprint": "abc",
        "key_last4": "1234",
        "host": "bedrock-runtime.eu-west-1.amazonaws.com",
        "provider": "aws",
        "model": "anthropic.claude-3-haiku",
        "started_at": datetime(2026, 12, 31, 23, 59, 59, tzinfo=UTC),
        "usage": usage | {"reasoning_tokens": None},
        "server_tool_uses": {},
        "service_tier": None,
        "price_status": "priced",
        "price_reason": None,
        "price_version": "genai-prices 0.2.3",
        "input_cost_usd": Decimal("0.0001"),
        "cache_read_cost_usd": Decimal("0.000004"),
        "cache_write_cost_usd": Decimal(0),
        "output_cost_usd": Decimal("0.00003"),
        "fee_cost_usd": Decimal(0),
        "cost_usd": Decimal("0.000134"),
    }
    return row | changes


def test_a_row_carries_tags_end_user_region_and_periods():
    rows = list(focus_rows(_row(tags={"project": "x1", "cost_center": 42, "nested": {"a": 1}}, end_user="u-7")))
    assert [r["x_ChargeType"] for r in rows] == ["input", "cache_read", "output"]
    first = rows[0]
    assert json.loads(first["Tags"]) == {"team": "alpha", "project": "x1", "cost_center": 42, "nested": '{"a": 1}'}
    assert first["x_EndUser"] == "u-7" and first["RegionId"] == "eu-west-1" and first["ProviderName"] == "AWS"
    assert first["ConsumedQuantity"] == 60  # uncached input
    assert (first["ChargePeriodStart"], first["ChargePeriodEnd"]) == ("2026-12-31T23:00:00Z", "2027-01-01T00:00:00Z")
    assert (first["BillingPeriodStart"], first["BillingPeriodEnd"]) == ("2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z")
    assert sum(r["BilledCost"] for r in rows) == Decimal("0.000134")


def test_money_no_token_carries_is_a_charge_of_its_own():
    rows = list(focus_rows(_row(cost_usd=Decimal("0.000135"), tags="not a dict")))
    other = rows[-1]
    assert other["x_ChargeType"] == "other" and other["BilledCost"] == Decimal("0.000001")
    assert (other["PricingQuantity"], other["PricingUnit"]) == (1, "Requests")
    assert json.loads(other["Tags"]) == {"team": "alpha"}
    assert csv_line(other)[COLUMNS.index("PricingQuantity")] == "1.0"


def test_an_unpriced_row_costs_nothing_and_says_so():
    rows = list(focus_rows(_row(price_status="unpriced", price_reason="unknown_model", cost_usd=None)))
    assert len(rows) == 3 and all(r["BilledCost"] == 0 and r["ListUnitPrice"] == 0 for r in rows)
    assert {r["x_PriceReason"] for r in rows} == {"unknown_model"}
    assert list(focus_rows(_row(usage=None, price_status="usage_missing", cost_usd=None))) == []


@pytest.mark.slow
@pytest.mark.skipif(not VALIDATOR, reason="LLMTAP_FOCUS_VALIDATOR (focus-validator's script) is not set")
def test_focus_validator_passes_the_file(store, tmp_path):
    if not store.startswith("sqlite"):
        pytest.skip("one backend's file is enough: the sums tests hold both backends to the same report")
    export(store, tmp_path)
    validator = Path(VALIDATOR)
    ran = subprocess.run(
        [str(validator), "--data-file", str(tmp_path / "focus.csv"), "--validate-version", "1.2", "--block-download"],
        cwd=package_folder(validator),  # it reads its currency codes from a relative path
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert failures(ran.stdout, rule_model(validator)) == [], ran.stdout[-4000:]


def test_the_verdict_excuses_only_a_losing_branch_of_a_passed_or():
    branches = [{"CheckFunction": "CheckModelRule", "ModelRuleId": f"InvoiceId-C-00{n}-C"} for n in (4, 5)]
    either = {"ValidationCriteria": {"Requirement": {"CheckFunction": "OR", "Items": branches}}}
    model = {"ModelRules": {"InvoiceId-C-003-C": either}}
    summary = "Total: 3 | Pass: 2 | Fail: 1 | Skipped: 0\n"
    passed = "✅ InvoiceId-C-003-C: PASS  (…)\n✅ InvoiceId-C-005-C: PASS  (…)\n❌ InvoiceId-C-004-C: FAIL  (…)\n"
    assert failures(summary + passed, model) == []
    lost = passed.replace("✅ InvoiceId-C-003-C: PASS", "❌ InvoiceId-C-003-C: FAIL")
    assert failures(summary + lost, model) == ["InvoiceId-C-003-C", "InvoiceId-C-004-C"]
    assert failures(passed, model) == ["no summary: the validator did not finish"]
