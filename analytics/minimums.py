"""The minimum cacheable prompt length per model: the table lives with the other cache
rules in protocols/rules.py; this name stays for the reports' SQL builder.

Not responsible for anything else.
"""

from __future__ import annotations

from llmtap.protocols.rules import MINIMUM_CACHEABLE, minimum

__all__ = ["MINIMUM_CACHEABLE", "minimum"]
