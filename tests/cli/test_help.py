"""Every command and subcommand of `llmtap` has a description and every option a help line
(SPEC §3), checked by walking the parser cli/main.py builds; and `report KIND --help`
shows the options of that kind only."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from llmtap.cli.main import build_parser


def _commands(parser: argparse.ArgumentParser, path: str) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, f"{path} {name}")


def _missing(parser: argparse.ArgumentParser, path: str) -> list[str]:
    missing = [] if (parser.description or "").strip() else [f"{path}: no description"]
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        name = "/".join(action.option_strings) or action.dest
        if isinstance(action, argparse._SubParsersAction):
            listed = {choice.dest: choice.help for choice in action._choices_actions}  # the parent's list
            missing += [f"{path} {sub}: no help line in {path}'s list" for sub in action.choices if not listed.get(sub)]
            continue
        if action.help is argparse.SUPPRESS:
            continue
        if not (action.help or "").strip():
            missing.append(f"{path} {name}: no help line")
    return missing


def test_every_command_has_a_description_and_every_option_a_help_line() -> None:
    missing = [line for path, parser in _commands(build_parser(), "llmtap") for line in _missing(parser, path)]
    assert not missing, "\n".join(missing)


def test_the_walk_finds_what_lacks_help() -> None:
    """The check itself: a parser with a bare option and no description is named."""
    parser = argparse.ArgumentParser(prog="x")
    parser.add_argument("--bare")
    commands = parser.add_subparsers(dest="command")
    commands.add_parser("sub")
    found = [line for path, sub in _commands(parser, "x") for line in _missing(sub, path)]
    assert found == [
        "x: no description",
        "x --bare: no help line",
        "x sub: no help line in x's list",
        "x sub: no description",
    ]


def _options(argv: list[str]) -> set[str]:
    """The options `llmtap ARGV --help` lists."""
    node = build_parser()
    for word in argv:
        sub = next(a for a in node._actions if isinstance(a, argparse._SubParsersAction))
        node = sub.choices[word]
    shown = {o for a in node._actions if a.help is not argparse.SUPPRESS for o in a.option_strings}
    usage = node.format_help()
    assert all(option in usage for option in shown)
    return shown


@pytest.mark.parametrize(
    ("kind", "present", "absent"),
    [
        ("cost", {"--by", "--since", "--format", "--tz", "--prices", "--lake"}, {"--list", "--top", "--model"}),
        ("cache", {"--list", "--by"}, {"--top", "--model"}),
        ("tools", {"--list"}, {"--top", "--prices", "--model"}),
        ("conversations", {"--top"}, {"--list", "--model"}),
        ("whatif", {"--model", "--provider", "--by"}, {"--list", "--top", "--lake"}),
        ("budgets", {"--format", "--tz"}, {"--by", "--since", "--list", "--top", "--lake"}),
    ],
)
def test_report_kind_help_shows_its_own_options(kind: str, present: set[str], absent: set[str]) -> None:
    options = _options(["report", kind])
    assert present <= options
    assert not absent & options


def test_report_help_lists_each_kind(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["report", "--help"])
    out = capsys.readouterr().out
    for kind in ("usage", "cost", "cache", "finish", "tools", "errors", "latency", "conversations", "budgets"):
        assert f"\n    {kind}" in out
