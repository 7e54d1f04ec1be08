"""Tags the operator names in the config (SPEC §4): `[tags."FINGERPRINT"]` for a key's
traffic and `tags = {...}` on a `[[proxy.reverse]]` listener, refused in one line when a
name or value could not be a tag. Not responsible for applying them (tests/addon/test_tags_header.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.test_config import assert_refused, place, run_with

__all__ = ["place"]  # the fixture, shared with test_config.py


BAD = [
    ('[tags."9f2c41d0"]\nProject = "atlas"\n', "[tags] 9f2c41d0 tag 'Project': a name is 1 to 32 of a-z, 0-9, _ and -"),
    (
        '[tags."9f2c41d0"]\nproject = "a,b"\n',
        "[tags] 9f2c41d0 tag 'project': a value is 1 to 64 printable characters without ','",
    ),
    (
        '[[proxy.reverse]]\nprovider = "anthropic"\nport = 8081\ntags = { "x y" = "1" }\n',
        "[[proxy.reverse]] #1 tags tag 'x y': a name is 1 to 32 of a-z, 0-9, _ and -",
    ),
]


@pytest.mark.parametrize("case", BAD, ids=[c[1][:40] for c in BAD])
def test_a_bad_tag_in_the_config_is_one_line(place: Path, case: tuple[str, str]) -> None:
    text, says = case
    config, result = run_with(place, f"tags{BAD.index(case)}", text, ("report", "usage"))
    assert_refused(result, config, says)


def test_good_tags_are_taken(place: Path) -> None:
    text = (
        '[tags."9f2c41d0"]\nproject = "atlas"\n'
        '[[proxy.reverse]]\nprovider = "anthropic"\nport = 8081\ntags = { env = "prod" }\n'
    )
    _, result = run_with(place, "tags-good", text, ("report", "usage"))
    assert result.code == 0, result.err
