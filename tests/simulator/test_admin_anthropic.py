"""The simulator's Anthropic Admin API reports (simulator/admin_anthropic.py), asked over
HTTP as `llmtap reconcile` will ask them: every page walked, the sums equal to what was
planted (by bucket, by group, through the filters), empty buckets kept, the documented
limits and refusals, cents as decimal strings, the key listing's cursors, and the admin
key in no request it keeps.

Not responsible for reconcile itself (issue 28), only for the server it will be tested
against.
"""

from __future__ import annotations

import json
import random
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

import pytest

from llmtap.simulator.admin_anthropic import COST_PATH, KEYS_PATH, USAGE_PATH, AnthropicAdmin, Cost, Key, Usage
from llmtap.simulator.upstream import Upstream

ADMIN_KEY = "sk-ant-admin01-simulated-" + "x" * 40
T0 = datetime(2026, 11, 2, tzinfo=UTC)
MODELS = ("claude-sonnet-4-5-20250929", "claude-haiku-4-5-20251001")


def _planted(seed: int = 7) -> list[Usage]:
    rng = random.Random(seed)
    return [
        Usage(
            at=T0 + timedelta(minutes=rng.randrange(10 * 24 * 60), seconds=rng.randrange(60)),
            model=rng.choice(MODELS),
            api_key_id=rng.choice(["apikey_01a", "apikey_01b", None]),
            workspace_id=rng.choice(["wrkspc_01x", None]),
            service_tier=rng.choice(["standard", "batch", "priority"]),
            uncached_input_tokens=rng.randrange(5000),
            cache_creation_5m_input_tokens=rng.randrange(2000),
            cache_creation_1h_input_tokens=rng.randrange(500),
            cache_read_input_tokens=rng.randrange(9000),
            output_tokens=rng.randrange(3000),
            web_search_requests=rng.randrange(3),
        )
        for _ in range(400)
    ]


@pytest.fixture
def admin() -> Iterator[tuple[str, AnthropicAdmin]]:
    costs = [
        Cost(day=date(2026, 11, 3), cents=Decimal("123.45"), model=MODELS[0], token_type="output_tokens"),
        Cost(day=date(2026, 11, 3), cents=Decimal("0.005"), model=MODELS[0], token_type="cache_read_input_tokens"),
        Cost(day=date(2026, 11, 3), cents=Decimal("40"), model=MODELS[1], service_tier="batch", workspace_id="w1"),
        Cost(day=date(2026, 11, 4), cents=Decimal("7.5"), cost_type="code_execution", model=None, token_type=None),
    ]
    keys = [Key(f"apikey_{i:03d}", f"key {i}", f"sk-ant-api03-R2D...{i:03d}AA", T0) for i in range(45)]
    router = AnthropicAdmin(ADMIN_KEY, usage=_planted(), costs=costs, keys=keys)
    with Upstream(router) as upstream:
        yield upstream.url, router


def _get(base: str, path: str, params: list[tuple[str, str]], key: str = ADMIN_KEY) -> tuple[int, Any]:
    request = urllib.request.Request(
        f"{base}{path}?{urlencode(params)}", headers={"x-api-key": key, "anthropic-version": "2023-06-01"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def _walk(base: str, path: str, params: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """Every bucket of the report, page after page, as the reference says to (bounded)."""
    buckets: list[dict[str, Any]] = []
    page: str | None = None
    for _ in range(100):
        status, body = _get(base, path, params + ([("page", page)] if page else []))
        assert status == 200, body
        buckets += body["data"]
        if not body["has_more"]:
            assert body["next_page"] is None
            return buckets
        page = body["next_page"]
    raise AssertionError("the report never ended")


TOKEN_FIELDS = ("uncached_input_tokens", "cache_read_input_tokens", "output_tokens")


def _totals(buckets: list[dict[str, Any]]) -> dict[str, int]:
    totals = dict.fromkeys((*TOKEN_FIELDS, "5m", "1h", "web"), 0)
    for bucket in buckets:
        for result in bucket["results"]:
            for name in TOKEN_FIELDS:
                totals[name] += result[name]
            totals["5m"] += result["cache_creation"]["ephemeral_5m_input_tokens"]
            totals["1h"] += result["cache_creation"]["ephemeral_1h_input_tokens"]
            totals["web"] += result["server_tool_use"]["web_search_requests"]
    return totals


def _planted_totals(rows: list[Usage]) -> dict[str, int]:
    return {
        "uncached_input_tokens": sum(r.uncached_input_tokens for r in rows),
        "cache_read_input_tokens": sum(r.cache_read_input_tokens for r in rows),
        "output_tokens": sum(r.output_tokens for r in rows),
        "5m": sum(r.cache_creation_5m_input_tokens for r in rows),
        "1h": sum(r.cache_creation_1h_input_tokens for r in rows),
        "web": sum(r.web_search_requests for r in rows),
    }


@pytest.mark.parametrize("width", ["1d", "1h"])
def test_every_page_of_the_usage_report_sums_to_what_was_planted(admin: tuple[str, AnthropicAdmin], width: str) -> None:
    base, router = admin
    params = [("starting_at", "2026-11-02T00:00:00Z"), ("ending_at", "2026-11-12T00:00:00Z"), ("bucket_width", width)]
    buckets = _walk(base, USAGE_PATH, params)
    step = timedelta(days=1) if width == "1d" else timedelta(hours=1)
    assert len(buckets) == (10 if width == "1d" else 240)  # empty buckets too, oldest first
    starts = [datetime.fromisoformat(b["starting_at"].replace("Z", "+00:00")) for b in buckets]
    assert starts == [T0 + step * i for i in range(len(buckets))]
    assert all(b["ending_at"].endswith("Z") for b in buckets)
    assert any(not b["results"] for b in buckets) == (width == "1h")
    assert _totals(buckets) == _planted_totals(router.usage)
    assert sum(1 for path in router.seen if "page=" in path) >= 1  # it took more than one page


def test_group_by_splits_and_filters_keep_only_their_rows(admin: tuple[str, AnthropicAdmin]) -> None:
    base, router = admin
    params = [
        ("starting_at", "2026-11-02T00:00:00Z"),
        ("ending_at", "2026-11-12T00:00:00Z"),
        ("group_by[]", "model"),
        ("group_by[]", "api_key_id"),
        ("service_tiers[]", "batch"),
    ]
    buckets = _walk(base, USAGE_PATH, params)
    for bucket in buckets:
        for result in bucket["results"]:
            assert result["model"] in MODELS and result["workspace_id"] is None and result["service_tier"] is None
    for model in MODELS:
        for key in ("apikey_01a", "apikey_01b", None):
            got = sum(
                r["output_tokens"]
                for b in buckets
                for r in b["results"]
                if r["model"] == model and r["api_key_id"] == key
            )
            want = sum(
                u.output_tokens
                for u in router.usage
                if u.model == model and u.api_key_id == key and u.service_tier == "batch"
            )
            assert got == want > 0


def test_the_documented_limits_and_refusals(admin: tuple[str, AnthropicAdmin]) -> None:
    base, router = admin
    start = ("starting_at", "2026-11-02T10:17:00Z")
    status, body = _get(base, USAGE_PATH, [start, ("bucket_width", "1h")])
    assert status == 200 and len(body["data"]) == 24 and body["data"][0]["starting_at"] == "2026-11-02T10:00:00Z"
    assert _get(base, USAGE_PATH, [start, ("bucket_width", "1m"), ("limit", "1440")])[0] == 200
    for bad in (
        [start, ("bucket_width", "1m"), ("limit", "1441")],
        [start, ("bucket_width", "1d"), ("limit", "0")],
        [start, ("bucket_width", "2d")],
        [("ending_at", "2026-11-03T00:00:00Z")],
        [("starting_at", "2026-11-02T00:00:00")],  # no zone
        [start, ("group_by[]", "team")],
        [start, ("page", "page_bm90LWEtZGF0ZQ==")],
    ):
        status, body = _get(base, USAGE_PATH, bad)
        assert status == 400 and body["type"] == "error" and body["error"]["type"] == "invalid_request_error", bad
    assert _get(base, COST_PATH, [start, ("bucket_width", "1h")])[0] == 400  # costs are daily only
    assert _get(base, COST_PATH, [start, ("limit", "32")])[0] == 400
    for key in ("sk-ant-api03-not-an-admin-key", ""):
        status, body = _get(base, USAGE_PATH, [start], key=key)
        assert status == 401 and body["error"]["type"] == "authentication_error"
    assert all(ADMIN_KEY not in path for path in router.seen)


def test_the_cost_report_in_cents_by_workspace_and_description(admin: tuple[str, AnthropicAdmin]) -> None:
    base, _ = admin
    params = [("starting_at", "2026-11-02T00:00:00Z"), ("ending_at", "2026-11-06T00:00:00Z")]
    plain = _walk(base, COST_PATH, params)
    assert [b["starting_at"][:10] for b in plain] == ["2026-11-02", "2026-11-03", "2026-11-04", "2026-11-05"]
    by_day = {b["starting_at"][:10]: b["results"] for b in plain}
    assert by_day["2026-11-02"] == [] and by_day["2026-11-05"] == []
    (day3,) = by_day["2026-11-03"]
    assert day3["amount"] == "163.455" and day3["currency"] == "USD"  # cents: $1.63455
    assert day3["model"] is None and day3["description"] is None and day3["workspace_id"] is None
    grouped = _walk(base, COST_PATH, [*params, ("group_by[]", "workspace_id"), ("group_by[]", "description")])
    rows = [r for b in grouped for r in b["results"]]
    assert sum(Decimal(r["amount"]) for r in rows) == Decimal("170.955")
    batch = [r for r in rows if r["service_tier"] == "batch"]
    assert len(batch) == 1 and batch[0]["workspace_id"] == "w1" and batch[0]["amount"] == "40.00"
    (code,) = [r for r in rows if r["cost_type"] == "code_execution"]
    assert code["description"] == "Code Execution Usage" and code["model"] is None and code["token_type"] is None
    output = [r for r in rows if r["token_type"] == "output_tokens"]
    assert output[0]["model"] == MODELS[0] and "Output Tokens" in output[0]["description"]


def test_the_key_listing_pages_by_cursor_and_shows_only_hints(admin: tuple[str, AnthropicAdmin]) -> None:
    base, _ = admin
    seen: list[str] = []
    after: str | None = None
    for _ in range(10):
        status, body = _get(base, KEYS_PATH, [("limit", "20")] + ([("after_id", after)] if after else []))
        assert status == 200
        seen += [k["id"] for k in body["data"]]
        assert all(
            k["partial_key_hint"].startswith("sk-ant-api03-") and "..." in k["partial_key_hint"] for k in body["data"]
        )
        if not body["has_more"]:
            break
        after = body["last_id"]
    assert seen == [f"apikey_{i:03d}" for i in range(45)]
    status, body = _get(base, KEYS_PATH, [("before_id", "apikey_030"), ("limit", "5")])
    assert [k["id"] for k in body["data"]] == [f"apikey_{i:03d}" for i in range(25, 30)] and body["has_more"]
    assert body["first_id"] == "apikey_025"
    assert _get(base, KEYS_PATH, [("limit", "1001")])[0] == 400
