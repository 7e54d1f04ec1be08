"""`llmtap` imports only the module of the command it runs (cli/main.py's COMMANDS): `--help`
lists every command from the table without importing one, and the table's help lines are
the ones the modules register themselves."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest

from llmtap.cli import main as cli_main
from tests.helpers import llmtap

HEAVY = ("sqlalchemy", "pydantic", "duckdb", "mitmproxy", "rich", "genai_prices", "jsonschema", "alembic")


def _commands(parser: argparse.ArgumentParser) -> dict[str, str | None]:
    (action,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {choice.dest: choice.help for choice in action._choices_actions}


def _imported_by(argv: list[str]) -> list[str]:
    """The modules of interest a fresh interpreter holds after building the parser for argv."""
    code = (
        "import json, sys\n"
        "from llmtap.cli import main\n"
        f"main.build_parser(main.command_in({argv!r}))\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.startswith('llmtap.cli.') "
        f"or m.split('.')[0] in {HEAVY!r})))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    return list(json.loads(done.stdout))


def test_the_table_names_every_command_with_its_own_help_line() -> None:
    assert _commands(cli_main.build_parser()) == {name: help for name, (_, help) in cli_main.COMMANDS.items()}


def test_help_imports_no_command_module() -> None:
    assert _imported_by(["--help"]) == ["llmtap.cli.errors", "llmtap.cli.main"]


@pytest.mark.parametrize(("argv", "module"), [(["log", "--team", "x"], "audit"), (["show", "abc"], "audit")])
def test_a_command_imports_its_module_only(argv: list[str], module: str) -> None:
    modules = {m for m in _imported_by(argv) if m.startswith("llmtap.cli.")}
    assert f"llmtap.cli.{module}" in modules
    others = {f"llmtap.cli.{name}" for name, _ in cli_main.COMMANDS.values()} - {f"llmtap.cli.{module}"}
    assert not modules & others


def test_help_lists_every_command() -> None:
    result = llmtap("--help", process=True)
    assert result.code == 0
    for name in cli_main.COMMANDS:
        assert f"\n    {name} " in result.out or f"\n    {name}\n" in result.out, name


def test_an_unknown_command_is_one_line() -> None:
    result = llmtap("no-such-command")
    assert result.code == 2
    assert result.err.count("\n") == 1 and "invalid choice: 'no-such-command'" in result.err
