"""tests/file_durations.py: each file's seconds summed from a JUnit XML report (test
classes folded into their file, files the checkout lacks left out), the command's one-line
errors, and the order tests/conftest.py gives a session's files (longest recorded first)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import file_durations

REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="tests.test_cli_errors" name="test_a" time="1.25" />
<testcase classname="tests.test_cli_errors" name="test_b" time="2.5" />
<testcase classname="tests.e2e.test_curl.TestCurl" name="test_c" time="4.0" />
<testcase classname="tests.gone.test_removed" name="test_d" time="9.0" />
</testsuite></testsuites>
"""


def test_seconds_are_summed_per_file_of_the_checkout(tmp_path: Path) -> None:
    report = tmp_path / "run.xml"
    report.write_text(REPORT)
    assert file_durations.from_junit(report) == {"tests/e2e/test_curl.py": 4.0, "tests/test_cli_errors.py": 3.8}


def test_the_command_records_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    report, record = tmp_path / "run.xml", tmp_path / "record.json"
    report.write_text(REPORT)
    monkeypatch.setattr(file_durations, "RECORD", record)
    assert file_durations.main([str(report)]) == 0
    assert json.loads(record.read_text()) == {"tests/e2e/test_curl.py": 4.0, "tests/test_cli_errors.py": 3.8}
    assert file_durations.recorded() == {"tests/e2e/test_curl.py": 4.0, "tests/test_cli_errors.py": 3.8}


@pytest.mark.parametrize("content", [None, "<testsuites", "<testsuites/>"])
def test_a_bad_report_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None
) -> None:
    report = tmp_path / "run.xml"
    if content is not None:
        report.write_text(content)
    assert file_durations.main([str(report)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("file_durations: ") and len(err.strip().splitlines()) == 1


def test_the_session_runs_the_longest_recorded_files_first(request: pytest.FixtureRequest) -> None:
    seconds = file_durations.recorded()
    order = list(dict.fromkeys(item.path.relative_to(file_durations.ROOT).as_posix() for item in request.session.items))
    timed = [seconds[name] for name in order if name in seconds]
    assert timed == sorted(timed, reverse=True)
