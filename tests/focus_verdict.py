"""Whether focus-validator passed a FOCUS file: its console report read against its own
rule model, for `.ci/run` and tests/analytics/test_export_focus.py.

focus-validator 2.2.1 exits 0 whatever it found, and counts as failed each branch of an
OR rule that another branch satisfied: FOCUS 1.2's InvoiceId must be null when a charge
has no invoice (C-004) or not null when it has one (C-005), and one of the two always
fails though their OR (C-003) passes. So a file passes when its report has a summary line
and every failed rule is a branch of an OR rule that passed.

    python -m tests.focus_verdict VALIDATOR REPORT   # VALIDATOR: the focus-validator script

Not responsible for running the validator (the caller does, from its package folder: it
reads its currency codes from a path relative to the working directory).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_RESULT = re.compile(r"^\S+ (?P<rule>[A-Za-z]+-[A-Z]-\d{3}-[A-Z]): (?P<status>PASS|FAIL|SKIPPED)\b", re.MULTILINE)
_SUMMARY = re.compile(r"^Total: \d+ \| Pass: \d+ \| Fail: \d+ \| Skipped: \d+$", re.MULTILINE)


def package_folder(validator: Path) -> Path:
    """The folder that holds the `focus_validator` package of the venv the script is in."""
    found = sorted(validator.resolve().parent.parent.glob("lib/python3*/site-packages/focus_validator"))
    if not found:
        raise FileNotFoundError(f"no focus_validator package beside {validator}")
    return found[-1].parent


def _or_branches(requirement: Any) -> Iterator[str]:
    if isinstance(requirement, dict):
        if requirement.get("CheckFunction") == "OR":
            for item in requirement.get("Items", []):
                if isinstance(item, dict) and item.get("CheckFunction") == "CheckModelRule":
                    yield item["ModelRuleId"]
        for value in requirement.values():
            yield from _or_branches(value)
    elif isinstance(requirement, list):
        for value in requirement:
            yield from _or_branches(value)


def failures(report: str, model: dict[str, Any]) -> list[str]:
    """The rules that failed for real; ["no summary"] when the report is not one."""
    if not _SUMMARY.search(report):
        return ["no summary: the validator did not finish"]
    status = {m["rule"]: m["status"] for m in _RESULT.finditer(report)}
    excused = {
        branch
        for rule, outcome in status.items()
        if outcome == "PASS"
        for branch in _or_branches(model["ModelRules"].get(rule, {}).get("ValidationCriteria", {}))
    }
    return sorted(rule for rule, outcome in status.items() if outcome == "FAIL" and rule not in excused)


def rule_model(validator: Path) -> dict[str, Any]:
    models = sorted((package_folder(validator) / "focus_validator" / "rules").glob("model-1.2*.json"))
    if not models:
        raise FileNotFoundError(f"no FOCUS 1.2 rule model beside {validator}")
    loaded: dict[str, Any] = json.loads(models[-1].read_text())
    return loaded


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m tests.focus_verdict VALIDATOR REPORT", file=sys.stderr)
        return 2
    report = Path(argv[1]).read_text(encoding="utf-8", errors="replace")
    failed = failures(report, rule_model(Path(argv[0])))
    summary = _SUMMARY.search(report)
    print(f"focus-validator: {summary.group(0) if summary else 'no summary'}")
    if failed:
        print(f"focus-validator: failed rules: {', '.join(failed)}", file=sys.stderr)
        return 1
    print("focus-validator: every failed rule is a branch of an OR rule that passed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
