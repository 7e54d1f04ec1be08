"""`X-LLMTap-Tags` on the hooks (SPEC §4): removed before the request is forwarded, kept
bounded on the record, under the operator's tags of a listener or a key; and the end user
the request body names. Not responsible for the header's grammar in detail
(tests/protocols/test_who_asked.py) nor for reports (tests/analytics/test_tags_users.py).
"""

from __future__ import annotations

import json

from mitmproxy import http

from llmtap.addon.recorder import Recorder
from llmtap.protocols.who_asked import MAX_TAGS
from tests.addon.conftest import LISTENER_PORT, Rig
from tests.addon.flows import request_flow, start_stream

KEY = "sk-ant-api03-tags-test-key-abcdwxyz"


def _finish(recorder: Recorder, flow: http.HTTPFlow) -> None:
    tee = start_stream(recorder, flow, "application/json")
    tee(b'{"id":"%s","type":"message","model":"claude-x","content":[],"stop_reason":"end_turn"}' % flow.id.encode())
    tee(b"")


def _tags_of(rig: Rig) -> dict[str, dict[str, str] | None]:
    return {row["response_id"]: json.loads(row["tags"]) if row["tags"] else None for row in rig.rows()}


def test_the_tags_header_is_removed_and_recorded(rig: Rig) -> None:
    flow = request_flow(headers=[("X-LLMTap-Tags", "project=atlas, Feature=search,bad pair"), ("x-api-key", KEY)])
    _finish(rig.recorder, flow)  # the request hook, then the response's
    assert "x-llmtap-tags" not in flow.request.headers
    assert flow.request.headers["x-api-key"] == KEY
    assert _tags_of(rig) == {flow.id: {"feature": "search", "project": "atlas"}}


def test_a_hostile_tags_header_stays_bounded(rig: Rig) -> None:
    many = ",".join(f"t{i}={'v' * 60}" for i in range(500)) + ",huge=" + "x" * 100_000
    flow = request_flow(headers=[("X-LLMTap-Tags", many), ("X-LLMTap-Tags", f"key={KEY}"), ("x-api-key", KEY)])
    _finish(rig.recorder, flow)
    tags = _tags_of(rig)[flow.id]
    assert tags is not None and len(tags) == MAX_TAGS and "huge" not in tags
    assert KEY not in json.dumps(rig.rows(), default=str)  # the request's own key, named in a tag, is scrubbed


def test_the_operators_tags_win_over_the_clients(rig: Rig) -> None:
    attribution = rig.recorder.attribution
    attribution.listener_tags = {LISTENER_PORT: {"project": "billing", "env": "prod"}}
    attribution.key_tags = {rig.fingerprint(KEY): {"env": "staging"}}
    flow = request_flow(
        headers=[("X-LLMTap-Tags", "project=forged,feature=ok"), ("x-api-key", KEY)], listener_port=LISTENER_PORT
    )
    _finish(rig.recorder, flow)
    other = request_flow(headers=[("X-LLMTap-Tags", "project=own"), ("x-api-key", "sk-ant-api03-other-key-zzzz")])
    _finish(rig.recorder, other)
    tags = _tags_of(rig)
    assert tags[flow.id] == {"project": "billing", "env": "staging", "feature": "ok"}
    assert tags[other.id] == {"project": "own"}


def test_the_end_user_of_the_body_is_recorded(rig: Rig) -> None:
    body = json.dumps(
        {"model": "claude-x", "max_tokens": 5, "messages": [], "metadata": {"user_id": "user-42"}}
    ).encode()
    flow = request_flow(body=body, headers=[("x-api-key", KEY)])
    _finish(rig.recorder, flow)
    assert [row["end_user"] for row in rig.rows()] == ["user-42"]
