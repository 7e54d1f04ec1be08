"""How long each test file took in a measured run (tests/file_durations.json), for
tests/conftest.py to hand the files to pytest-xdist's workers longest first, so the two
workers finish together; and the command that records them from a run's JUnit XML:

    .venv/bin/pytest --junitxml=/tmp/run.xml
    .venv/bin/python -m tests.file_durations /tmp/run.xml

Not responsible for what any test checks: stale or missing figures only change the order
in which the files run (a file the record lacks is guessed from whether it is slow).
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

RECORD = Path(__file__).with_name("file_durations.json")
ROOT = Path(__file__).resolve().parent.parent


def recorded() -> dict[str, float]:
    """Seconds per file, by its path from the checkout (`tests/e2e/test_curl.py`)."""
    try:
        return {str(name): float(seconds) for name, seconds in json.loads(RECORD.read_text()).items()}
    except (OSError, ValueError, AttributeError):
        return {}


def from_junit(report: Path) -> dict[str, float]:
    """Each file's seconds (set-up, call and tear-down of its tests) in a JUnit XML report."""
    seconds: defaultdict[str, float] = defaultdict(float)
    for case in ET.parse(report).iter("testcase"):
        parts = (case.get("classname") or "").split(".")
        module = [part for part in parts if not part[:1].isupper()]  # a test class's name goes
        if module:
            seconds["/".join(module) + ".py"] += float(case.get("time") or 0)
    return {name: round(total, 1) for name, total in sorted(seconds.items()) if (ROOT / name).is_file()}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tests.file_durations JUNIT_XML", file=sys.stderr)
        return 2
    try:
        durations = from_junit(Path(argv[0]))
    except (OSError, ET.ParseError) as error:
        print(f"file_durations: cannot read {argv[0]}: {error}", file=sys.stderr)
        return 2
    if not durations:
        print(f"file_durations: {argv[0]} has no test of this checkout", file=sys.stderr)
        return 2
    RECORD.write_text(json.dumps(durations, indent=1) + "\n")
    print(f"{len(durations)} files, {sum(durations.values()):.0f} s in all, written to {RECORD}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
