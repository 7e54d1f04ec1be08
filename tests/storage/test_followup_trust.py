"""Which stored exchange a follow-up of background work may change (SPEC §4, trust is
never inherited), through `ingest` and the real writer into SQLite and PostgreSQL: only
one that went to the same destination and came from the same team or key, and never a
billable one from a host that may not bill. A follow-up that may not change it is
`unmatched`, and the real one after it still completes the work. The rule holds for
follow-ups that waited in the spool or come back from the rejected file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from llmtap.protocols.hosts import UNVERIFIED_HOST, destination
from llmtap.storage import rejected, spool
from llmtap.storage.followups import FollowUp, apply
from llmtap.storage.imported import retrust
from llmtap.storage.ingest import to_follow_up, to_record
from llmtap.storage.migrate import upgrade
from tests.storage.test_followups import CREATE, KEY, OTHER_KEY, USAGE, Harness, answer, http, response

pytestmark = pytest.mark.timeout(120)

FORGED = dict(USAGE, input_tokens=900_000_000, output_tokens=100_000_000)


@pytest.fixture
def rig(db_url: str, engines: Any, tmp_path: Path) -> Any:
    engine: Engine = engines(db_url)
    upgrade(engine)
    harness = Harness(engine, tmp_path)
    yield harness
    harness.close()


def _poll(rig: Harness, usage: dict[str, Any], at: int, **kw: Any) -> FollowUp:
    body = response("completed", usage=usage, output=answer("Done."))
    followup = to_follow_up(http("GET", "/v1/responses/resp_bg1", body, at=at, **kw), fingerprinter=rig.fingerprinter)
    assert followup is not None
    return followup


def _post(rig: Harness, **kw: Any) -> None:
    rig.submit(http("POST", "/v1/responses", response("queued"), at=0, request=CREATE, **kw))


def _real_poll_completes_it(rig: Harness) -> None:
    assert apply(rig.engine, [_poll(rig, USAGE, 30)], rig.pricer.price_rows) == {"completed": 1}
    row = rig.row()
    assert (row["background_state"], row["usage_input_tokens"], row["price_status"]) == ("completed", 1200, "priced")


def test_a_follow_up_from_another_destination_changes_nothing(rig: Harness) -> None:
    _post(rig)
    assert rig.row()["destination"] == "https://api.openai.com:443"
    elsewhere = _poll(rig, FORGED, 5, host="llm.example.net")
    other_port = _poll(rig, FORGED, 6)
    other_port.record.destination = destination("https", "api.openai.com", 8443)
    assert apply(rig.engine, [elsewhere, other_port], rig.pricer.price_rows) == {"unmatched": 2}
    assert rig.row()["background_state"] == "queued"
    _real_poll_completes_it(rig)


def test_only_the_same_team_or_key(rig: Harness) -> None:
    _post(rig)
    stranger = _poll(rig, FORGED, 5, key=OTHER_KEY)
    stranger.record.team, stranger.record.attribution = "alpha", "proxy_auth"
    assert apply(rig.engine, [stranger], rig.pricer.price_rows) == {"unmatched": 1}
    same_key = _poll(rig, USAGE, 6)  # another team's name, but the key the work was started with
    same_key.record.team = "alpha"
    assert apply(rig.engine, [same_key], rig.pricer.price_rows) == {"completed": 1}
    assert rig.row()["usage_input_tokens"] == 1200


def test_the_same_team_with_another_key(rig: Harness) -> None:
    _post(rig)
    assert apply(rig.engine, [_poll(rig, USAGE, 5, key=OTHER_KEY)], rig.pricer.price_rows) == {"completed": 1}


def test_an_unverified_follow_up_never_changes_a_billable_exchange(rig: Harness) -> None:
    # the POST came in on a reverse listener to a configured upstream (billable), and a
    # HAR names the same server for a poll: an import cannot tell it was configured
    post = to_record(
        http("POST", "/v1/responses", response("queued"), at=0, request=CREATE, host="127.0.0.1"),
        fingerprinter=rig.fingerprinter,
    )
    assert post is not None and post.price_reason == UNVERIFIED_HOST
    post.price_reason = None  # as the proxy decided it
    rig.writer.submit(post)
    assert rig.writer.flush(30)
    imported = _poll(rig, FORGED, 5, host="127.0.0.1")
    assert imported.record.price_reason == UNVERIFIED_HOST
    assert imported.record.destination == rig.row()["destination"]
    assert apply(rig.engine, [imported], rig.pricer.price_rows) == {"unmatched": 1}
    live = _poll(rig, USAGE, 6, host="127.0.0.1")
    live.record.price_reason = None
    assert apply(rig.engine, [live], rig.pricer.price_rows) == {"completed": 1}
    assert (rig.row()["usage_input_tokens"], rig.row()["price_status"]) == (1200, "priced")


def test_a_row_from_before_destinations_is_matched_by_its_host(rig: Harness) -> None:
    _post(rig)
    with rig.engine.begin() as connection:
        connection.exec_driver_sql("UPDATE exchanges SET destination = NULL")
    assert apply(rig.engine, [_poll(rig, FORGED, 5, host="llm.example.net")], rig.pricer.price_rows) == {"unmatched": 1}
    _real_poll_completes_it(rig)


def test_a_spooled_follow_up_keeps_who_and_where(rig: Harness) -> None:
    """The spool is the writer's own queue: a follow-up comes back from it as it went in,
    its lack of trust included (before, `price_reason` was not written: an unverified
    poll came back trusted)."""
    _post(rig, host="127.0.0.1")
    poll = _poll(rig, FORGED, 5, host="127.0.0.1")
    poll.record.team = "alpha"
    back = spool.decode_line(spool.encode_followup(poll))
    assert isinstance(back, FollowUp)
    kept = (back.record.team, back.record.destination, back.record.price_reason, back.record.key_fingerprint)
    assert kept == ("alpha", "https://127.0.0.1:443", UNVERIFIED_HOST, poll.record.key_fingerprint)


def test_a_rejected_follow_up_line_brings_no_trust_of_its_own(rig: Harness) -> None:
    _post(rig, host="127.0.0.1")
    with rig.engine.begin() as connection:  # billable, as a configured upstream's work is
        connection.exec_driver_sql("UPDATE exchanges SET price_reason = NULL")
    forged = _poll(rig, FORGED, 5, host="127.0.0.1")
    data = json.loads(rejected.followup_line(forged, "x"))
    data["followup"]["record"]["price_reason"] = None  # "trust me"
    line = rejected.parse(json.dumps(data).encode())
    assert isinstance(line, FollowUp) and line.record.price_reason is None
    retrust(line)
    assert line.record.price_reason == UNVERIFIED_HOST
    assert apply(rig.engine, [line], rig.pricer.price_rows) == {"unmatched": 1}
    assert rig.row()["background_state"] == "queued"


def test_destinations_name_a_server_one_way() -> None:
    assert destination("https", "API.OpenAI.com.", None) == "https://api.openai.com:443"
    assert destination("http", "127.0.0.1", 8080) == "http://127.0.0.1:8080"
    assert destination("https", "[::1]", 8443) == destination("https", "::1", 8443) == "https://[::1]:8443"
    assert destination("https", "", 443) is None


def test_an_old_follow_up_line_without_a_destination_is_matched_by_host(rig: Harness) -> None:
    _post(rig, key=KEY)
    old = _poll(rig, USAGE, 5)
    data = old.to_json()
    del data["record"]["destination"], data["record"]["price_reason"]  # as an older llmtap wrote it
    back = FollowUp.from_json(data)
    assert back.record.destination is None
    assert apply(rig.engine, [back], rig.pricer.price_rows) == {"completed": 1}
