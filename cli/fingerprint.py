"""`llmtap fingerprint`: the fingerprint of an API key (read from standard input, never
from the command line, where it would land in shell history), for the config's `[teams]`
map. Prints the fingerprint and the last four characters, never the key."""

from __future__ import annotations

import argparse
import sys

from llmtap.cli import settings as settings_module
from llmtap.cli.errors import UsageError


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "fingerprint",
        help="print an API key's fingerprint (key read from stdin) for the [teams] map",
    )
    settings_module.add_common(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from llmtap.storage.secrets import KeyFingerprinter

    settings = settings_module.load(args)
    if sys.stdin.isatty():
        print("paste the key and press Enter:", file=sys.stderr)
    key = sys.stdin.readline().strip()
    if not key:
        raise UsageError("no key on standard input")
    fingerprinter = KeyFingerprinter.from_file(settings.secret_file)
    print(f'"{fingerprinter.fingerprint(key)}" = "TEAM"   # key ending …{fingerprinter.last4(key)}')
    return 0
