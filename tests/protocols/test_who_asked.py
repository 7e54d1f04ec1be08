"""The grammar and bounds of `X-LLMTap-Tags` and the end-user fields (protocols/who_asked.py).
Not responsible for the hooks that read them (tests/addon/test_tags_header.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from llmtap.protocols.who_asked import (
    MAX_TAG_VALUE_CHARS,
    MAX_TAGS,
    MAX_USER_CHARS,
    TAG_NAME,
    anthropic_user,
    merged,
    openai_user,
    parse_tags,
    vertex_user,
)


def test_pairs_are_read_and_bad_ones_skipped() -> None:
    assert parse_tags("project=x,feature=y") == {"project": "x", "feature": "y"}
    assert parse_tags(["Project = x ", "feature=a=b", "=v", "novalue=", "sp ace=1", "ok=\x1b[2J"]) == {
        "project": "x",
        "feature": "a=b",
    }
    assert parse_tags("p=1,p=2") == {"p": "2"}  # a later repeat wins
    assert parse_tags(None) == {} and parse_tags("") == {}
    assert parse_tags("v=" + "x" * (MAX_TAG_VALUE_CHARS + 1)) == {}


@given(st.lists(st.text(max_size=400), max_size=8))
def test_any_header_gives_bounded_tags(values: list[str]) -> None:
    tags = parse_tags(values)
    assert len(tags) <= MAX_TAGS
    for name, value in tags.items():
        assert TAG_NAME.fullmatch(name)
        assert 0 < len(value) <= MAX_TAG_VALUE_CHARS and value.isprintable() and "," not in value


def test_the_operators_tags_come_first_and_win() -> None:
    client = {f"c{i}": "x" for i in range(MAX_TAGS)} | {"project": "forged"}
    out = merged(client, {"project": "billing", "env": "prod"})
    assert out["project"] == "billing" and out["env"] == "prod" and len(out) == MAX_TAGS


def test_each_providers_end_user_field() -> None:
    assert anthropic_user({"metadata": {"user_id": "u-1"}}) == "u-1"
    assert anthropic_user({"metadata": "u-1"}) is None and anthropic_user({}) is None
    assert openai_user({"user": "old", "safety_identifier": "new"}) == "new"
    assert openai_user({"user": "old"}) == "old" and openai_user({"user": 5}) is None
    assert vertex_user({"labels": {"team": "a", "user": "u-3"}}) == "u-3"
    assert vertex_user({"labels": ["user"]}) is None
    assert anthropic_user({"metadata": {"user_id": "x" * (MAX_USER_CHARS + 1)}}) is None
    assert openai_user({"user": "bad\nline"}) is None
