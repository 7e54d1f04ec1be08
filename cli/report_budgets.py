"""`llmtap report budgets`. Being written (issue 16)."""

from __future__ import annotations

import argparse

from llmtap.cli.errors import UsageError


def run(args: argparse.Namespace) -> int:
    raise UsageError("report budgets is not available yet")
