"""Entry point: parses the command line and dispatches to one command module.

Every failure a user can cause ends as one line on stderr and a non-zero exit, never a
traceback. Not responsible for what the commands do.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from llmtap.cli import (
    audit,
    config,
    dashboard,
    db,
    decode,
    demo_command,
    export,
    fingerprint,
    importer,
    lake,
    maintain,
    pricing,
    proxy,
    report,
)
from llmtap.cli.errors import UsageError, one_line
from llmtap.storage.errors import StoreError

COMMANDS = (
    demo_command,
    proxy,
    report,
    pricing,
    audit,
    dashboard,
    decode,
    importer,
    export,
    maintain,
    fingerprint,
    db,
    lake,
    config,
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, not the usage block
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="llmtap",
        description="Record LLM API traffic, decode it into canonical records, and report on it.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True
    for module in COMMANDS:
        module.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # Payload values may nest as deep as json.loads allows; printing or storing them
    # recurses in json.dumps, so give it room (the C stack easily holds this).
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 20000))
    parser = build_parser()
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
    sys.exit(main())


if __name__ == "__main__":
    entry()
