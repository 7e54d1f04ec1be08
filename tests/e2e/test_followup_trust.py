"""Trust is never inherited (SPEC §4): a poll, resumed stream or cancel of background work
completes the exchange its POST stored only when it reached the same destination and came
from the same team or key. Through a real `llmtap proxy` of this module's own, with
`[auth]` for two teams, in front of two local upstreams: one configured (the reverse
listeners' upstream, so priced) and one nobody configured.

Team beta starts background work (Responses and Interactions) on a reverse listener with
its proxy credentials. Then a forged follow-up (another team's poll at the unconfigured
host with made-up usage; beta's own poll there with too little; another team's cancel at
the very destination) changes nothing, and beta's real poll afterwards completes the work
and bills it once, at the real usage.
"""

from __future__ import annotations

import base64
import json
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
from sqlalchemy import select

from llmtap.analytics.pricing import Pricer
from llmtap.protocols.followups import is_terminal
from llmtap.simulator.upstream import Reply, Upstream
from llmtap.storage import schema
from llmtap.storage.engine import make_engine
from tests.e2e import harness
from tests.e2e.test_who_pays import running
from tests.helpers import free_port

pytestmark = pytest.mark.slow

PASSWORDS = {"alpha": "pw-alpha-" + "a" * 24, "beta": "pw-beta-" + "b" * 24}
REAL = {"input_tokens": 2048, "output_tokens": 512}  # what the work really used
FORGED = {"input_tokens": 900_000_000, "output_tokens": 100_000_000}  # a bill for someone else
UNDER = {"input_tokens": 1, "output_tokens": 1}  # a bill too small for one's own work


def _basic(team: str) -> str:
    return "Basic " + base64.b64encode(f"{team}:{PASSWORDS[team]}".encode()).decode()


def _json(body: dict[str, Any]) -> Reply:
    return Reply(status=200, content_type="application/json", chunks=[json.dumps(body).encode()])


@dataclass
class Rig:
    root: Path
    db: Path
    routes: harness.Routes
    regular: int  # the regular proxy
    listeners: dict[str, int]  # reverse listeners: openai, gemini (to the configured upstream)
    configured: str  # the configured upstream's URL
    elsewhere: str  # an upstream nobody configured

    def send(self, method: str, url: str, body: dict[str, Any] | None, reply: Reply, **headers: str) -> int:
        """One request, straight to a reverse listener or through the regular proxy
        (`team=` says whose proxy credentials it carries there)."""
        team = headers.pop("team", None)
        token = self.routes.add(reply)
        sent = {"content-type": "application/json", harness.CASE_HEADER: token} | headers
        proxy = f"http://{team}:{PASSWORDS[team]}@127.0.0.1:{self.regular}" if team else None
        with httpx2.Client(proxy=proxy, timeout=10, trust_env=False) as client:
            answer = client.request(method, url, content=json.dumps(body) if body is not None else None, headers=sent)
        self.routes.done(token)
        return answer.status_code

    def rows(self, response_id: str) -> list[dict[str, Any]]:
        engine = make_engine(f"sqlite:///{self.db}")
        try:
            with engine.connect() as connection:
                ex = schema.exchanges
                found = connection.execute(select(ex).where(ex.c.response_id == response_id)).mappings()
                return [dict(row) for row in found]
        finally:
            engine.dispose()

    def row(self, response_id: str, done: Any, timeout: float = 20.0) -> dict[str, Any]:
        """The one exchange of this id once `done(row)` holds (the writer applies follow-ups
        in batches, after the rows of theirs)."""
        deadline = time.monotonic() + timeout
        while True:
            rows = self.rows(response_id)
            assert len(rows) <= 1, f"a follow-up became an exchange of its own: {rows}"
            if rows and done(rows[0]):
                return rows[0]
            assert time.monotonic() < deadline, f"not done within {timeout}s: {rows}"
            time.sleep(0.05)


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory, routes: harness.Routes) -> Iterator[Rig]:
    root = tmp_path_factory.mktemp("followup-trust")
    config = "[auth]\n" + "".join(f'{team} = "{password}"\n' for team, password in PASSWORDS.items())
    with Upstream(routes) as configured, Upstream(routes) as elsewhere:
        regular, openai, gemini = free_port(), free_port(), free_port()
        args = [
            "--quiet", "--port", str(regular),
            "--reverse", f"openai={openai}", "--reverse", f"gemini={gemini}",
            "--upstream", f"openai={configured.url}", "--upstream", f"gemini={configured.url}",
        ]  # fmt: skip
        with running(root, args, config, wait=(regular, openai, gemini)) as proxy:
            yield Rig(
                root=root,
                db=proxy.db,
                routes=routes,
                regular=regular,
                listeners={"openai": openai, "gemini": gemini},
                configured=configured.url,
                elsewhere=elsewhere.url,
            )


# -- the two kinds of background work ------------------------------------------------------------


@dataclass(frozen=True)
class Work:
    """One protocol's background work: its create route, follow-up routes and bodies."""

    listener: str
    create_path: str
    follow_path: str  # `{id}` filled in
    model: str
    key_header: str
    key_prefix: str

    def create(self) -> dict[str, Any]:
        return {"model": self.model, "input": "Write the long report.", "background": True}

    def body(self, rid: str, status: str, usage: dict[str, int] | None = None) -> dict[str, Any]:
        raise NotImplementedError

    def real_usage(self) -> dict[str, int]:
        return {"input": REAL["input_tokens"], "output": REAL["output_tokens"]}


class Responses(Work):
    def body(self, rid: str, status: str, usage: dict[str, int] | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "id": rid,
            "object": "response",
            "status": status,
            "background": True,
            "model": self.model,
            "output": [],
            "usage": None,
        }
        if usage is not None:
            text = {"type": "output_text", "text": "Done."}
            body["output"] = [{"type": "message", "role": "assistant", "content": [text]}]
            body["usage"] = {**usage, "total_tokens": usage["input_tokens"] + usage["output_tokens"]}
        return body


class Interactions(Work):
    def body(self, rid: str, status: str, usage: dict[str, int] | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"id": rid, "object": "interaction", "status": status, "model": self.model}
        if usage is not None:
            body["outputs"] = [{"type": "text", "text": "Done."}]
            body["usage"] = {
                "total_input_tokens": usage["input_tokens"],
                "total_output_tokens": usage["output_tokens"],
                "total_tokens": usage["input_tokens"] + usage["output_tokens"],
            }
        return body


WORK = {
    "responses": Responses("openai", "/v1/responses", "/v1/responses/{id}", "gpt-4o-mini", "authorization", "sk-proj-"),
    "interactions": Interactions(
        "gemini", "/v1beta/interactions", "/v1beta/interactions/{id}", "gemini-2.5-flash", "x-goog-api-key", "AIzaSy"
    ),
}


def _key_headers(work: Work, key: str) -> dict[str, str]:
    return {work.key_header: f"Bearer {key}" if work.key_header == "authorization" else key}


def _started_by_beta(rig: Rig, work: Work) -> tuple[str, str]:
    """Beta's background work, queued: its response id and beta's key."""
    rid = ("resp_trust_" if isinstance(work, Responses) else "v1_trust") + secrets.token_hex(6)
    key = harness.canary(work.key_prefix)
    listener = f"http://127.0.0.1:{rig.listeners[work.listener]}"
    status = rig.send(
        "POST",
        listener + work.create_path,
        work.create(),
        _json(work.body(rid, "queued")),
        **_key_headers(work, key),
        **{"proxy-authorization": _basic("beta")},
    )
    assert status == 200
    queued = rig.row(rid, lambda r: r["background_state"] == "queued")
    assert (queued["team"], queued["attribution"], queued["price_status"]) == ("beta", "proxy_auth", "usage_missing")
    return rid, key


def _beta_polls_for_real(rig: Rig, work: Work, rid: str, key: str) -> dict[str, Any]:
    """Beta's real poll, at the work's own destination: it completes the work."""
    listener = f"http://127.0.0.1:{rig.listeners[work.listener]}"
    status = rig.send(
        "GET",
        listener + work.follow_path.format(id=rid),
        None,
        _json(work.body(rid, "completed", REAL)),
        **_key_headers(work, key),
        **{"proxy-authorization": _basic("beta")},
    )
    assert status == 200
    return rig.row(rid, lambda r: is_terminal(r["background_state"]))


def _billed_once_for_real(row: dict[str, Any]) -> None:
    assert row["background_state"] == "completed", row["background_state"]
    assert (row["usage_input_tokens"], row["usage_output_tokens"]) == (REAL["input_tokens"], REAL["output_tokens"])
    assert (row["team"], row["price_status"]) == ("beta", "priced")
    alone = {**row, "price_status": None, "cost_total_pico": None, "price_reason": None}
    Pricer().price_rows([alone])
    assert row["cost_total_pico"] == alone["cost_total_pico"] > 0


@pytest.mark.parametrize("kind", sorted(WORK))
def test_another_teams_forged_poll_at_an_unconfigured_host_changes_nothing(rig: Rig, kind: str) -> None:
    work = WORK[kind]
    rid, key = _started_by_beta(rig, work)
    # alpha, with its own credentials and key, asks a server of its own about beta's id
    forged = rig.send(
        "GET",
        rig.elsewhere + work.follow_path.format(id=rid),
        None,
        _json(work.body(rid, "completed", FORGED)),
        team="alpha",
        **_key_headers(work, harness.canary(work.key_prefix)),
    )
    assert forged == 200
    _billed_once_for_real(_beta_polls_for_real(rig, work, rid, key))


@pytest.mark.parametrize("kind", sorted(WORK))
def test_the_owners_own_poll_at_another_host_is_ignored(rig: Rig, kind: str) -> None:
    work = WORK[kind]
    rid, key = _started_by_beta(rig, work)
    # beta itself, with its own key, underbills its work from a server nobody configured
    under = rig.send(
        "GET",
        rig.elsewhere + work.follow_path.format(id=rid),
        None,
        _json(work.body(rid, "completed", UNDER)),
        team="beta",
        **_key_headers(work, key),
    )
    assert under == 200
    _billed_once_for_real(_beta_polls_for_real(rig, work, rid, key))


@pytest.mark.parametrize("kind", sorted(WORK))
def test_another_teams_cancel_at_the_same_destination_leaves_it_billable(rig: Rig, kind: str) -> None:
    work = WORK[kind]
    rid, key = _started_by_beta(rig, work)
    # alpha cancels beta's work at the very upstream it runs on (through the regular proxy)
    cancelled = rig.send(
        "POST",
        rig.configured + work.follow_path.format(id=rid) + "/cancel",
        {},
        _json(work.body(rid, "cancelled")),
        team="alpha",
        **_key_headers(work, harness.canary(work.key_prefix)),
    )
    assert cancelled == 200
    _billed_once_for_real(_beta_polls_for_real(rig, work, rid, key))
