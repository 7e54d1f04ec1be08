"""The simulator's OpenAI organization Usage and Costs APIs (simulator/admin_openai.py),
asked over HTTP as `llmtap reconcile` will ask them: every page walked, the sums equal to
what was planted (by bucket, by group, through the filters and the batch switch), Unix
seconds, dollars as numbers, the documented limits and refusals, and the project and key
listings' cursors.

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

from llmtap.simulator.admin_openai import (
    COSTS_PATH,
    PROJECTS_PATH,
    USAGE_PATH,
    Cost,
    OpenAIAdmin,
    Project,
    ProjectKey,
    Usage,
)
from llmtap.simulator.upstream import Upstream

ADMIN_KEY = "sk-admin-simulated-" + "y" * 40
T0 = datetime(2026, 11, 2, tzinfo=UTC)
START = int(T0.timestamp())
MODELS = ("gpt-4.1-2025-04-14", "gpt-4.1-mini-2025-04-14")


def _planted(seed: int = 11) -> list[Usage]:
    rng = random.Random(seed)
    rows = []
    for _ in range(300):
        cached = rng.randrange(4000)
        rows.append(
            Usage(
                at=T0 + timedelta(seconds=rng.randrange(9 * 86400)),
                model=rng.choice(MODELS),
                project_id=rng.choice(["proj_a", "proj_b"]),
                api_key_id=rng.choice(["key_1", "key_2", None]),
                batch=rng.random() < 0.3,
                input_tokens=cached + rng.randrange(6000),
                input_cached_tokens=cached,
                output_tokens=rng.randrange(2000),
            )
        )
    return rows


@pytest.fixture
def admin() -> Iterator[tuple[str, OpenAIAdmin]]:
    costs = [
        Cost(date(2026, 11, 3), Decimal("1.25"), f"{MODELS[0]}, input", "proj_a", quantity=Decimal(500000)),
        Cost(date(2026, 11, 3), Decimal("0.5"), f"{MODELS[0]}, output", "proj_a", quantity=Decimal(62500)),
        Cost(date(2026, 11, 3), Decimal("2"), f"{MODELS[1]}, input", "proj_b", "key_2", Decimal(5000000)),
        Cost(date(2026, 11, 5), Decimal("0.06"), f"{MODELS[1]}, output", "proj_b"),
    ]
    projects = [Project(f"proj_{i:02d}", f"project {i}", T0) for i in range(30)]
    keys = [ProjectKey(f"key_{i:02d}", "proj_00", f"key {i}", f"sk-proj-abc...{i:02d}z", T0) for i in range(25)]
    router = OpenAIAdmin(ADMIN_KEY, usage=_planted(), costs=costs, projects=projects, keys=keys)
    with Upstream(router) as upstream:
        yield upstream.url, router


def _get(base: str, path: str, params: list[tuple[str, Any]], key: str = ADMIN_KEY) -> tuple[int, Any]:
    request = urllib.request.Request(f"{base}{path}?{urlencode(params)}", headers={"Authorization": f"Bearer {key}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read(), parse_float=Decimal)
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def _walk(base: str, path: str, params: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    page = None
    for _ in range(100):
        status, body = _get(base, path, params + ([("page", page)] if page else []))
        assert status == 200 and body["object"] == "page", body
        found += body["data"]
        if not body["has_more"]:
            return found
        page = body["next_page"]
    raise AssertionError("the report never ended")


@pytest.mark.parametrize("width", ["1d", "1h"])
def test_every_page_of_the_usage_sums_to_what_was_planted(admin: tuple[str, OpenAIAdmin], width: str) -> None:
    base, router = admin
    end = START + 9 * 86400
    buckets = _walk(base, USAGE_PATH, [("start_time", START), ("end_time", end), ("bucket_width", width)])
    step = 86400 if width == "1d" else 3600
    assert [b["start_time"] for b in buckets] == list(range(START, end, step))
    assert all(b["object"] == "bucket" and b["end_time"] - b["start_time"] == step for b in buckets)
    results = [r for b in buckets for r in b["results"]]
    assert all(r["object"] == "organization.usage.completions.result" and r["model"] is None for r in results)
    for name in ("input_tokens", "input_cached_tokens", "output_tokens", "num_model_requests"):
        assert sum(r[name] for r in results) == sum(getattr(u, name) for u in router.usage), name
    assert all(r["input_cached_tokens"] <= r["input_tokens"] for r in results)  # cached are inside input


def test_group_by_filters_and_the_batch_switch(admin: tuple[str, OpenAIAdmin]) -> None:
    base, router = admin
    params: list[tuple[str, Any]] = [("start_time", START), ("end_time", START + 9 * 86400)]
    params += [("group_by[]", "model"), ("group_by[]", "batch"), ("project_ids[]", "proj_a")]
    results = [r for b in _walk(base, USAGE_PATH, params) for r in b["results"]]
    for model in MODELS:
        for batch in (True, False):
            got = sum(r["output_tokens"] for r in results if r["model"] == model and r["batch"] is batch)
            want = sum(
                u.output_tokens
                for u in router.usage
                if u.model == model and u.batch is batch and u.project_id == "proj_a"
            )
            assert got == want > 0
    assert all(r["project_id"] is None and r["api_key_id"] is None for r in results)
    only_batch = [r for b in _walk(base, USAGE_PATH, [*params[:2], ("batch", "true")]) for r in b["results"]]
    assert sum(r["num_model_requests"] for r in only_batch) == sum(1 for u in router.usage if u.batch)


def test_costs_in_dollars_by_project_and_line_item(admin: tuple[str, OpenAIAdmin]) -> None:
    base, _ = admin
    params: list[tuple[str, Any]] = [("start_time", START), ("end_time", START + 5 * 86400)]
    plain = _walk(base, COSTS_PATH, params)
    assert [len(b["results"]) for b in plain] == [0, 1, 0, 1, 0]
    assert plain[1]["results"][0]["amount"] == {"value": Decimal("3.75"), "currency": "usd"}
    grouped = _walk(base, COSTS_PATH, [*params, ("group_by", "project_id"), ("group_by", "line_item")])
    rows = [r for b in grouped for r in b["results"]]
    assert sum(r["amount"]["value"] for r in rows) == Decimal("3.81")
    (input_a,) = [r for r in rows if r["line_item"] == f"{MODELS[0]}, input"]
    assert input_a["project_id"] == "proj_a" and input_a["quantity"] == 500000 and input_a["api_key_id"] is None
    by_key = [r for b in _walk(base, COSTS_PATH, [*params, ("api_key_ids", "key_2")]) for r in b["results"]]
    assert [r["amount"]["value"] for r in by_key] == [Decimal("2.0")]


def test_the_documented_limits_and_refusals(admin: tuple[str, OpenAIAdmin]) -> None:
    base, router = admin
    status, body = _get(base, USAGE_PATH, [("start_time", START + 1234), ("bucket_width", "1h")])
    assert status == 200 and len(body["data"]) == 24 and body["data"][0]["start_time"] == START  # snapped to its hour
    assert _get(base, COSTS_PATH, [("start_time", START), ("limit", 180)])[0] == 200
    for path, bad in (
        (USAGE_PATH, [("start_time", START), ("bucket_width", "1m"), ("limit", 1441)]),
        (USAGE_PATH, [("start_time", START), ("bucket_width", "1w")]),
        (USAGE_PATH, [("end_time", START)]),
        (USAGE_PATH, [("start_time", "2026-11-02")]),
        (USAGE_PATH, [("start_time", START), ("group_by", "team")]),
        (USAGE_PATH, [("start_time", START), ("batch", "yes")]),
        (COSTS_PATH, [("start_time", START), ("bucket_width", "1h")]),
        (COSTS_PATH, [("start_time", START), ("limit", 181)]),
        (COSTS_PATH, [("start_time", START), ("page", "page_AAAA")]),
    ):
        status, body = _get(base, path, bad)
        assert status == 400 and body["error"]["type"] == "invalid_request_error", bad
    for key in ("sk-proj-an-ordinary-key", ""):
        status, body = _get(base, USAGE_PATH, [("start_time", START)], key=key)
        assert status == 401 and body["error"]["code"] == "invalid_api_key"
    assert all(ADMIN_KEY not in path for path in router.seen)


def test_the_project_and_key_listings_page_by_cursor(admin: tuple[str, OpenAIAdmin]) -> None:
    base, _ = admin
    for path, count, prefix in ((PROJECTS_PATH, 30, "proj_"), (f"{PROJECTS_PATH}/proj_00/api_keys", 25, "key_")):
        ids: list[str] = []
        after = None
        for _ in range(10):
            status, body = _get(base, path, [("limit", 7)] + ([("after", after)] if after else []))
            assert status == 200 and body["object"] == "list"
            ids += [item["id"] for item in body["data"]]
            if not body["has_more"]:
                break
            after = body["last_id"]
        assert ids == [f"{prefix}{i:02d}" for i in range(count)]
    status, body = _get(base, f"{PROJECTS_PATH}/proj_00/api_keys", [])
    assert all(k["redacted_value"].startswith("sk-proj-") and "..." in k["redacted_value"] for k in body["data"])
    assert _get(base, f"{PROJECTS_PATH}/proj_99/api_keys", [])[1]["data"] == []
    assert _get(base, PROJECTS_PATH, [("limit", 101)])[0] == 400
