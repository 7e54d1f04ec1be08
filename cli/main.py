"""Entry point: parses the command line and dispatches to one command module.

Every failure a user can cause ends as one line on stderr and a non-zero exit, never a
traceback. Not responsible for what the commands do.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from llmtap.cli.errors import UsageError, one_line
from llmtap.storage.errors import StoreError

# Every command: its name -> (its module in llmtap.cli, its one-line help for `llmtap --help`),
# in the order `--help` lists them. Only the module of the command being run is imported
# (most pull in pydantic, SQLAlchemy or DuckDB); the others appear as these lines. A module
# may register several commands (audit: log and show). tests/cli/test_main_lazy.py checks
# each line against the help the module itself registers.
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": (
        "demo_command",
        "the whole job offline: simulated providers, the real proxy, SDK traffic, reports, dashboard",
    ),
    "simulate": (
        "simulate",
        "a simulated LLM provider on 127.0.0.1, to try the proxy with curl, an SDK or an agent without keys",
    ),
    "proxy": ("proxy", "run the recording proxy (mitmproxy with the llmtap addon)"),
    "report": ("report", "usage, cost, cache, finish, tools, errors, latency, conversations, budgets or whatif"),
    "reprice": ("pricing", "price every stored exchange again (after a price file or price data change)"),
    "log": ("audit", "recorded exchanges, newest first, with filters"),
    "show": ("audit", "one exchange in full, or its conversation"),
    "dashboard": ("dashboard", "write the dashboard as one offline HTML file, or serve it live"),
    "decode": ("decode", "decode one recorded exchange and print the canonical JSON"),
    "import": ("importer", "import HAR files, mitmproxy flow files and agent session logs into the store"),
    "export": ("export", "export exchange rows with their cost (jsonl, csv, parquet)"),
    "prune": ("maintain", "delete exchanges older than an age, and unused bodies"),
    "reprocess": ("maintain", "re-decode stored raw bodies with the current translators, and rename providers"),
    "fingerprint": (
        "fingerprint",
        "print an API key's fingerprint (key read from stdin) for the [teams] map; status; rekey",
    ),
    "db": ("db", "manage the store's schema"),
    "reconcile": ("reconcile", "compare the provider's own usage and cost reports with what llmtap recorded"),
    "lake": ("lake", "copy the report facts into Apache Iceberg tables (a lake)"),
    "config": (
        "config",
        "show the effective settings and where each came from; `config check FILE` validates a file",
    ),
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, not the usage block
        raise UsageError(message)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole parser (for tools that walk it); given the command a command line runs
    ("" for none), one where only that command's module is imported and every other
    command is its name and help line."""
    parser = _Parser(
        prog="llmtap",
        description="Record LLM API traffic, decode it into canonical records, and report on it.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True
    registered: set[str] = set()
    for name, (module_name, help_line) in COMMANDS.items():
        if module_name in registered:
            continue  # registered with an earlier command of the same module
        if command is None or COMMANDS.get(command, ("",))[0] == module_name:
            importlib.import_module(f"llmtap.cli.{module_name}").register(commands)
            registered.add(module_name)
        else:
            commands.add_parser(name, help=help_line)
    return parser


def command_in(argv: Sequence[str]) -> str:
    """The command a command line runs: its first word that is not an option (the top level
    takes no option with a value), or ""."""
    return next((word for word in argv if not word.startswith("-")), "")


def main(argv: Sequence[str] | None = None) -> int:
    # Payload values may nest as deep as json.loads allows; printing or storing them
    # recurses in json.dumps, so give it room (the C stack easily holds this).
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 20000))
    parser = build_parser(command_in(sys.argv[1:] if argv is None else argv))
    try:
        args = parser.parse_args(argv)
        return int(args.run(args) or 0)
    except (UsageError, StoreError) as exc:
        print(f"llmtap: error: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("llmtap: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1
    except Exception as exc:  # noqa: BLE001 - a bug: one line, the traceback on request
        if os.environ.get("LLMTAP_DEBUG"):
            raise
        print(f"llmtap: internal error: {one_line(repr(exc))} (set LLMTAP_DEBUG=1 for the traceback)", file=sys.stderr)
        return 70


def entry() -> None:
    # These machines (and many containers) set PYTHONDONTWRITEBYTECODE, so each start would
    # compile its imports again (genai-prices' price table alone takes a second). The
    # command writes the bytecode of what it imports, once, into the installed packages'
    # __pycache__: uv's compile-bytecode did that for all 17,000 files of the venv on every
    # `uv run`, 1-2 s each time.
    sys.dont_write_bytecode = False
    # A command is one short run that makes many objects and few cycles: a report's
    # imports and its rows (18,000 of them with a dict each at 100M exchanges) set off the
    # cyclic collector ~250 times at the default threshold of 700, each pass walking all
    # that is alive. Collecting the young generation every 50,000 allocations instead
    # still bounds what cycles can pile up (a proxy or a long import included).
    gc.set_threshold(50_000, 20, 20)
    code = main()
    # The interpreter's finalization collects cycles several times over everything still
    # alive (a report's rows, the price table, SQLAlchemy's and pydantic's classes): 0.25 s
    # of a 2 s report. Frozen, they are left out of those passes; each object is still
    # freed as its references go, and atexit handlers and thread joins run as before.
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    entry()
