"""`llmtap reconcile` against the simulator's admin APIs (simulator/admin_anthropic.py,
admin_openai.py) on 127.0.0.1, over a store the real writer filled: every cause planted is
found where it was planted and nowhere else, the totals equal the planted totals to the
cent, the admin key is in no output, file or log; and a hostile server (a huge body,
endless pages, bad JSON, a redirect, a key echoed back) is one line, never a traceback.

Not responsible for the simulators themselves (tests/simulator/) or `report cost`'s prices
(tests/analytics/test_cost.py): llmtap's side is read from `report cost` here.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from llmtap.simulator import admin_anthropic as an
from llmtap.simulator import admin_openai as oa
from llmtap.simulator.upstream import Reply, Seen, Upstream
from llmtap.simulator.wire_common import json_reply
from tests.analytics import wire as w
from tests.analytics.conftest import fill
from tests.helpers import llmtap

ADMIN_ANTHROPIC = "sk-ant-admin01-reconcile-" + "q" * 40
ADMIN_OPENAI = "sk-admin-reconcile-" + "r" * 40
D1, D2 = datetime(2026, 11, 2, tzinfo=UTC), datetime(2026, 11, 3, tzinfo=UTC)
DAY1, DAY2 = "2026-11-02", "2026-11-03"
SONNET, HAIKU, IMAGINED = "claude-sonnet-4-5-20250929", "claude-haiku-4-5-20251001", "claude-imaginary-9"
GPT, MINI, GPT_IMAGINED = "gpt-4o-2024-08-06", "gpt-4o-mini-2024-07-18", "gpt-imaginary-1"
KEY_A = "test-key-recon-anthropic-KA01"  # llmtap keeps its last four
KEY_O = "test-key-recon-openai-KO01"
WINDOW = ("--since", DAY1, "--until", "2026-11-04")


def _anthropic(model: str, at: datetime, fresh: int, write: int, read: int, out: int, n: int) -> Any:
    return w.record(
        w.ANTHROPIC,
        w.anthropic_request(model, [{"role": "user", "content": f"reconcile {n}"}], cache=None),
        w.anthropic_response(model, w.anthropic_usage(fresh, write, read, out), msg_id=f"msg_rec{n}"),
        at=at,
        team="recon",
        key=KEY_A,
    )


def _chat(model: str, at: datetime, prompt: int, cached: int, out: int, n: int) -> Any:
    return w.record(
        w.CHAT,
        w.chat_request(model, f"reconcile {n}"),
        w.chat_response(model, w.chat_usage(prompt, out, cached), cid=f"chatcmpl-rec{n}"),
        at=at,
        team="recon",
        key=KEY_O,
    )


RECORDS = [
    _anthropic(SONNET, D1 + timedelta(hours=9), 1000, 200, 300, 400, 1),  # agrees
    _anthropic(SONNET, D1 + timedelta(hours=10), 500, 0, 0, 100, 2),  # agrees (same row)
    _anthropic(SONNET, D2 + timedelta(hours=9), 2000, 0, 1000, 500, 3),  # price_differs
    _anthropic(HAIKU, D1 + timedelta(hours=9), 3000, 0, 0, 700, 4),  # tokens_differ
    _anthropic(HAIKU, D2 + timedelta(hours=9), 1000, 0, 0, 100, 5),  # + batch usage
    _anthropic(IMAGINED, D2 + timedelta(hours=11), 800, 0, 0, 80, 6),  # unpriced
    _chat(GPT, D1 + timedelta(hours=9), 5000, 1000, 300, 7),  # agrees
    _chat(GPT, D2 + timedelta(hours=9), 4000, 0, 200, 8),  # price_differs
    _chat(MINI, D1 + timedelta(hours=9), 9000, 0, 900, 9),  # tokens_differ
    _chat(MINI, D2 + timedelta(hours=9), 1000, 0, 100, 10),  # + batch usage
    _chat(GPT_IMAGINED, D2 + timedelta(hours=11), 700, 0, 70, 11),  # unpriced
]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    folder = tmp_path_factory.mktemp("reconcile-store")
    url = f"sqlite:///{folder / 'store.db'}"
    fill(url, RECORDS, folder / "spool")
    return url


@pytest.fixture(scope="module")
def recorded(store: str) -> dict[tuple[str, str], dict[str, Any]]:
    """llmtap's own `report cost` rows by (day, model)."""
    result = llmtap("report", "cost", "--by", "day,model", "--format", "json", "--db", store)
    assert result.code == 0, result.err
    return {(row["day"], row["model"]): row for row in result.json()}


def _cents(recorded: dict[tuple[str, str], dict[str, Any]], day: str, model: str) -> Decimal:
    return Decimal(recorded[(day, model)]["cost_usd"] or 0) * 100


def _anthropic_plant(recorded: dict[tuple[str, str], dict[str, Any]]) -> an.AnthropicAdmin:
    d1, d2 = D1.date(), D2.date()

    def usage(at: datetime, model: str, key: str | None, ws: str | None, **tokens: int) -> an.Usage:
        return an.Usage(at=at + timedelta(hours=1), model=model, api_key_id=key, workspace_id=ws, **tokens)

    def tokens(fresh: int, write: int, read: int, out: int) -> dict[str, int]:
        return {
            "uncached_input_tokens": fresh,
            "cache_creation_5m_input_tokens": write,
            "cache_read_input_tokens": read,
            "output_tokens": out,
        }

    use = [
        usage(D1, SONNET, "apikey_a", "wrk_1", **tokens(1500, 200, 300, 500)),
        usage(D2, SONNET, "apikey_a", "wrk_1", **tokens(2000, 0, 1000, 500)),
        usage(D1, HAIKU, "apikey_a", "wrk_1", **tokens(3000, 0, 0, 800)),  # 100 more output
        usage(D2, HAIKU, "apikey_a", "wrk_1", **tokens(1000, 0, 0, 100)),
        an.Usage(D2, HAIKU, "apikey_a", "wrk_1", service_tier="batch", uncached_input_tokens=4000, output_tokens=40),
        usage(D2, IMAGINED, "apikey_a", "wrk_1", **tokens(800, 0, 0, 80)),
        usage(D1, SONNET, "apikey_c", "wrk_2", **tokens(700, 0, 0, 70)),  # a key the proxy never saw
        usage(D2, SONNET, None, None, **tokens(600, 0, 0, 60)),  # the Workbench
    ]

    def cost(day: date, cents: Decimal | str, model: str | None, ws: str | None = "wrk_1", **more: Any) -> an.Cost:
        return an.Cost(day=day, cents=Decimal(cents), model=model, workspace_id=ws, **more)

    costs = [
        cost(d1, _cents(recorded, DAY1, SONNET), SONNET),
        cost(d2, _cents(recorded, DAY2, SONNET) + 50, SONNET, token_type="output_tokens"),  # +$0.50
        cost(d1, _cents(recorded, DAY1, HAIKU) + 10, HAIKU),
        cost(d2, _cents(recorded, DAY2, HAIKU), HAIKU),
        cost(d2, "20", HAIKU, service_tier="batch"),
        cost(d2, "200", IMAGINED),
        cost(d1, "123", SONNET, "wrk_2"),
        cost(d2, "40", SONNET, None),
        cost(d1, "30", None, cost_type="web_search", service_tier=None, context_window=None, token_type=None),
        cost(
            d2,
            "-500",
            None,
            None,
            cost_type="promotion_credit",
            service_tier=None,
            context_window=None,
            token_type=None,
        ),
    ]
    keys = [
        an.Key("apikey_a", "recorded", "test-k...KA01", D1, "wrk_1"),
        an.Key("apikey_c", "unseen", "test-k...KC03", D1, "wrk_2"),
    ]
    return an.AnthropicAdmin(ADMIN_ANTHROPIC, usage=use, costs=costs, keys=keys)


def _openai_plant(recorded: dict[tuple[str, str], dict[str, Any]]) -> oa.OpenAIAdmin:
    d1, d2 = D1.date(), D2.date()

    def usage(
        at: datetime, model: str, key: str, project: str, inp: int, cached: int, out: int, **more: Any
    ) -> oa.Usage:
        return oa.Usage(at + timedelta(hours=1), model, project, None, key, input_tokens=inp,
                        input_cached_tokens=cached, output_tokens=out, **more)  # fmt: skip

    def usd(day: str, model: str) -> Decimal:
        return Decimal(recorded[(day, model)]["cost_usd"] or 0)

    use = [
        usage(D1, GPT, "key_o", "proj_1", 5000, 1000, 300),
        usage(D2, GPT, "key_o", "proj_1", 4000, 0, 200),
        usage(D1, MINI, "key_o", "proj_1", 9500, 0, 900),  # 500 more input
        usage(D2, MINI, "key_o", "proj_1", 1000, 0, 100),
        usage(D2, MINI, "key_o", "proj_1", 6000, 0, 60, batch=True),
        usage(D2, GPT_IMAGINED, "key_o", "proj_1", 700, 0, 70),
        usage(D1, GPT, "key_p", "proj_2", 800, 0, 80),  # a key the proxy never saw
    ]
    costs = [
        oa.Cost(d1, usd(DAY1, GPT), f"{GPT}, input", "proj_1", "key_o"),
        oa.Cost(d2, usd(DAY2, GPT) + Decimal("0.75"), f"{GPT}, output", "proj_1", "key_o"),
        oa.Cost(d1, usd(DAY1, MINI) + Decimal("0.05"), f"{MINI}, input", "proj_1", "key_o"),
        oa.Cost(d2, usd(DAY2, MINI), f"{MINI}, input", "proj_1", "key_o"),
        oa.Cost(d2, Decimal("0.12"), f"{MINI}, input (batch)", "proj_1", "key_o"),
        oa.Cost(d2, Decimal("1.5"), f"{GPT_IMAGINED}, input", "proj_1", "key_o"),
        oa.Cost(d1, Decimal("0.9"), f"{GPT}, input", "proj_2", "key_p"),
        oa.Cost(d1, Decimal("0.25"), "web search tool calls", "proj_1", "key_o"),
        oa.Cost(d2, Decimal("-3"), "Credit grant", None, None),
    ]
    projects = [oa.Project("proj_1", "one", D1), oa.Project("proj_2", "two", D1)]
    keys = [oa.ProjectKey("key_o", "proj_1", "seen", "test-k...KO01", D1),
            oa.ProjectKey("key_p", "proj_2", "unseen", "test-k...KP02", D1)]  # fmt: skip
    return oa.OpenAIAdmin(ADMIN_OPENAI, usage=use, costs=costs, projects=projects, keys=keys)


def _planted_cost(router: Any) -> Decimal:
    if isinstance(router, an.AnthropicAdmin):
        return sum((c.cents for c in router.costs), Decimal(0)) / 100
    return sum((c.dollars for c in router.costs), Decimal(0))


def _causes(rows: list[dict[str, Any]]) -> dict[tuple[Any, ...], list[str]]:
    return {(r["day"], r["model"], r["key"]): r["causes"] for r in rows if r["causes"]}


EXPECTED = {
    "anthropic": {
        (DAY2, SONNET, "…KA01"): ["price_differs"],
        (DAY1, HAIKU, "…KA01"): ["tokens_differ"],
        (DAY2, HAIKU, "…KA01"): ["tokens_differ", "batch"],
        (DAY2, IMAGINED, "…KA01"): ["unpriced"],
        (DAY1, SONNET, "…KC03"): ["not_recorded"],
        (DAY2, SONNET, None): ["not_recorded"],
        (DAY1, "(fees)", None): ["fees"],
        (DAY2, "(credits)", None): ["credits"],
    },
    "openai": {
        (DAY2, GPT, "…KO01"): ["price_differs"],
        (DAY1, MINI, "…KO01"): ["tokens_differ"],
        (DAY2, MINI, "…KO01"): ["tokens_differ", "batch"],
        (DAY2, GPT_IMAGINED, "…KO01"): ["unpriced"],
        (DAY1, GPT, "…KP02"): ["not_recorded"],
        (DAY1, "(fees)", None): ["fees"],
        (DAY2, "(credits)", None): ["credits"],
    },
}
ADMIN = {"anthropic": ADMIN_ANTHROPIC, "openai": ADMIN_OPENAI}
ENV = {"anthropic": "ANTHROPIC_ADMIN_KEY", "openai": "OPENAI_ADMIN_KEY"}


@pytest.fixture(params=["anthropic", "openai"])
def served(
    request: pytest.FixtureRequest, recorded: dict[tuple[str, str], dict[str, Any]]
) -> Iterator[tuple[str, str, Any]]:
    provider = request.param
    router = _anthropic_plant(recorded) if provider == "anthropic" else _openai_plant(recorded)
    with Upstream(router) as upstream:
        yield provider, upstream.url, router


def _run(provider: str, url: str, store: str, *more: str, key: str | None = None) -> Any:
    env = {ENV[provider]: key if key is not None else ADMIN[provider]}
    return llmtap("reconcile", "--provider", provider, *WINDOW, "--api-base", url, "--db", store, *more, env=env)


def test_every_planted_cause_is_found_where_it_was_planted(
    served: tuple[str, str, Any],
    store: str,
    recorded: dict[tuple[str, str], dict[str, Any]],
    llmtap_home: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    provider, url, router = served
    caplog.set_level(logging.DEBUG)
    result = _run(provider, url, store, "--format", "json")
    assert result.code == 0, result.err
    rows = result.json()
    *body, total = rows
    assert _causes(body) == EXPECTED[provider]
    # the rows that agree say so, and carry both sides' equal numbers
    (agrees,) = [r for r in body if r["day"] == DAY1 and r["model"] == (SONNET if provider == "anthropic" else GPT)
                 and r["key"] in ("…KA01", "…KO01")]  # fmt: skip
    assert agrees["causes"] == [] and agrees["gap_usd"] == 0
    assert agrees["provider_input_tokens"] == agrees["llmtap_input_tokens"] > 0
    assert agrees["provider_cache_read_tokens"] == agrees["llmtap_cache_read_tokens"]
    scope = "workspace" if provider == "anthropic" else "project"
    assert agrees[scope] == ("wrk_1" if provider == "anthropic" else "proj_1")
    # the totals, to the cent: the provider's what was planted, llmtap's what it priced
    assert total["day"] == "total"
    planted = _planted_cost(router)
    mine = sum((Decimal(r["cost_usd"] or 0) for (_d, m), r in recorded.items() if _ours(provider, m)), Decimal(0))
    assert round(total["provider_cost_usd"], 2) == round(planted, 2)
    assert total["provider_cost_usd"] == planted  # exact, not only to the cent
    assert total["llmtap_cost_usd"] == mine
    assert total["gap_usd"] == planted - mine
    assert sum(Decimal(r["gap_usd"]) for r in body) == total["gap_usd"]
    assert set(total["causes"]) == {c for causes in EXPECTED[provider].values() for c in causes}
    for metric in ("input_tokens", "output_tokens"):
        assert total[f"provider_{metric}"] == sum(r[f"provider_{metric}"] for r in body)
    _no_key_anywhere(ADMIN[provider], [result.out, result.err, caplog.text, *router.seen], [tmp_path, llmtap_home])
    kept = json.loads((llmtap_home / f"reconcile-{provider}.json").read_text(), parse_float=Decimal)
    assert kept["rows"][-1]["gap_usd"] == total["gap_usd"]
    assert (llmtap_home / f"reconcile-{provider}.json").stat().st_mode & 0o777 == 0o600


def _ours(provider: str, model: str) -> bool:
    return model.startswith("claude") if provider == "anthropic" else model.startswith("gpt")


def _no_key_anywhere(key: str, texts: list[str], folders: list[Path]) -> None:
    for text in texts:
        assert key not in text
    for folder in folders:
        for path in folder.rglob("*"):
            if path.is_file():
                assert key.encode() not in path.read_bytes(), path


@pytest.mark.parametrize("form", ["table", "jsonl", "csv"])
def test_the_other_formats_carry_the_same_rows(served: tuple[str, str, Any], store: str, form: str) -> None:
    provider, url, _router = served
    result = _run(provider, url, store, "--format", form)
    assert result.code == 0, result.err
    assert ADMIN[provider] not in result.out + result.err
    if form == "jsonl":
        rows = [json.loads(line) for line in result.out.splitlines()]
        assert rows[-1]["day"] == "total" and isinstance(rows[0]["causes"], list)
    elif form == "csv":
        lines = result.out.splitlines()
        assert lines[0].startswith("day,model,") and lines[-1].startswith("total,")
        assert "not_recorded" in result.out
    else:
        assert "total" in result.out and "not_recorded" in result.out and "causes:" in result.out


def test_no_admin_key_is_one_line_and_a_wrong_one_is_refused(served: tuple[str, str, Any], store: str) -> None:
    provider, url, _router = served
    missing = _run(provider, url, store, key="")
    assert missing.code != 0 and ENV[provider] in missing.err and len(missing.err.strip().splitlines()) == 1
    wrong_key = "sk-wrong-" + "z" * 30
    wrong = _run(provider, url, store, key=wrong_key)
    assert wrong.code != 0 and "401" in wrong.err and len(wrong.err.strip().splitlines()) == 1
    assert wrong_key not in wrong.err + wrong.out


# -- hostile servers --------------------------------------------------------------------------


class Hostile:
    """A server answering every request the same hostile way."""

    def __init__(self, how: str, redirect_to: str = "") -> None:
        self.how = how
        self.redirect_to = redirect_to
        self.count = 0

    def __call__(self, seen: Seen) -> Reply:
        self.count += 1
        if self.how == "huge":
            return Reply(chunks=[b'{"data": ["' + b"x" * (1 << 20)] * 10 + [b'"]}'])
        if self.how == "endless":
            return json_reply({"data": [], "has_more": True, "next_page": f"page_{self.count}"})
        if self.how == "same_cursor":
            return json_reply({"data": [], "has_more": True, "next_page": "page_again"})
        if self.how == "bad_json":
            return Reply(chunks=[b'{"data": [1, 2'], chunked=False)
        if self.how == "deep_json":
            return Reply(chunks=[b"[" * 100_000], chunked=False)
        if self.how == "wrong_shape":
            return json_reply({"data": [{"starting_at": "yesterday", "results": [{"output_tokens": "many"}]}]})
        if self.how == "bad_tokens":
            bucket = {
                "starting_at": "2026-11-02T00:00:00Z",
                "start_time": 1793577600,
                "results": [{"output_tokens": -5}],
            }
            return json_reply({"data": [bucket], "has_more": False})
        if self.how == "echo_key":
            key = seen.headers.get("x-api-key") or seen.headers.get("authorization", "")
            return json_reply({"error": {"message": f"bad key {key}\n\x1b[2J\x9b31m"}}, 401)
        if self.how == "redirect":
            return Reply(status=302, headers=[("location", self.redirect_to + seen.path)], chunks=[b""], chunked=False)
        raise AssertionError(self.how)


HOSTILE = {
    "huge": "larger than",
    "endless": "more than",
    "same_cursor": "next_page",
    "bad_json": "not JSON",
    "deep_json": "not JSON",
    "wrong_shape": "malformed",
    "bad_tokens": "token count",
    "echo_key": "401",
    "redirect": "302",
}


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
@pytest.mark.parametrize("how", list(HOSTILE))
def test_a_hostile_server_is_one_line_without_the_key(store: str, provider: str, how: str, tmp_path: Path) -> None:
    elsewhere = Hostile("echo_key")
    with Upstream(elsewhere) as other, Upstream(Hostile(how, other.url)) as upstream:
        result = _run(provider, upstream.url, store)
    assert result.code == 2, result.err
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("llmtap: error:"), result.err
    assert HOSTILE[how] in lines[0], lines[0]
    assert "\x1b" not in result.err and "\x9b" not in result.err
    assert elsewhere.count == 0  # a redirect never carried the key to another server
    _no_key_anywhere(ADMIN[provider], [result.out, result.err], [tmp_path])


def test_an_unreachable_server_is_one_line(store: str) -> None:
    from tests.helpers import free_port

    result = _run("anthropic", f"http://127.0.0.1:{free_port()}", store)
    assert result.code == 2 and "cannot reach" in result.err and len(result.err.strip().splitlines()) == 1


def test_plain_http_goes_only_to_this_machine(store: str) -> None:
    result = _run("openai", "http://192.0.2.1:9", store)
    assert result.code == 2 and "plain http only" in result.err and len(result.err.strip().splitlines()) == 1
    bad = _run("anthropic", "ftp://example.invalid", store)
    assert bad.code == 2 and "http(s) URL" in bad.err
