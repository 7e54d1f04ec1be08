"""`llmtap report whatif`. Being written (issue 16)."""

from __future__ import annotations

import argparse

from llmtap.cli.errors import UsageError


def run(args: argparse.Namespace) -> int:
    raise UsageError("report whatif is not available yet")
