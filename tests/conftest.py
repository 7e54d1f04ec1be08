"""Fixtures for every test: the project's corpus (tests/corpus/, which must be there: a run
that found no cases would prove nothing) and an LLMTAP_HOME of the run's own, so no test
reads or writes ~/.llmtap or follows the caller's llmtap settings."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import file_durations
from tests.corpus_tools import CORPUS, ROOT, case_folders

__all__ = ["CORPUS", "ROOT"]

LLMTAP_SETTINGS = ("LLMTAP_DB", "LLMTAP_SPOOL", "LLMTAP_CONFIG", "LLMTAP_BODIES", "LLMTAP_PRICES", "LLMTAP_SECRET_FILE")


def pytest_configure(config: pytest.Config) -> None:
    try:
        found = case_folders(CORPUS)
    except FileNotFoundError as missing:
        raise pytest.UsageError(f"{missing}: the tests need the project's corpus (tests/corpus/)") from None
    if not found:
        raise pytest.UsageError(f"the corpus at {CORPUS} holds no cases")
    # The Python processes the tests start (the CLI, proxies, writer processes: hundreds)
    # keep the bytecode they compile, as an installed tool's would, instead of compiling
    # every import again (a machine-wide PYTHONDONTWRITEBYTECODE=1 costs each start ~0.4 s,
    # seconds under load).
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # A pytest-xdist worker starts with COLUMNS=80 and LINES=24 in its environment, which
        # the CLI would take for a terminal's width: the tests see the CLI as a pipe sees it,
        # as in one process; a test that wants a width sets COLUMNS itself.
        for name in ("COLUMNS", "LINES"):
            os.environ.pop(name, None)


# Folders (and files) whose tests run real processes end to end: `pytest -m "not slow"`
# leaves them out for a quick local run; CI runs everything.
SLOW = ("tests/e2e/", "tests/demo/", "tests/dashboards/", "tests/hardening/", "tests/test_packaging.py")
UNRECORDED_SLOW_S = 60.0  # a new end-to-end file: started early, in case it is long


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        where = item.path.relative_to(ROOT).as_posix()
        if where.startswith(SLOW):
            item.add_marker(pytest.mark.slow)
    # The files longest first, by the seconds tests/file_durations.json recorded for them
    # (pytest-xdist hands out whole files in this order: pyproject.toml turns off its own
    # reordering, by number of tests alone, which left one-test end-to-end files such as the
    # OTLP outage's for last): the short ones then fill the two workers' gaps at the end,
    # instead of one worker finishing a long file alone while the other idles. A file the
    # record lacks counts as UNRECORDED_SLOW_S if it has slow tests, else as nothing.
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    seconds = file_durations.recorded()

    def weight(path: Path) -> float:
        guess = UNRECORDED_SLOW_S if path in slow_files else 0.0
        return seconds.get(path.relative_to(ROOT).as_posix(), guess)

    items.sort(key=lambda item: -weight(item.path))


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    return CORPUS


@pytest.fixture(scope="session", autouse=True)
def run_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One LLMTAP_HOME for the whole run, with the caller's llmtap settings cleared."""
    home = tmp_path_factory.mktemp("llmtap-home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LLMTAP_HOME", str(home))
        for name in LLMTAP_SETTINGS:
            patch.delenv(name, raising=False)
        yield home


@pytest.fixture
def llmtap_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A test's own LLMTAP_HOME (storage tests take it automatically: spools are per home)."""
    home = tmp_path / "llmtap-home"
    monkeypatch.setenv("LLMTAP_HOME", str(home))
    return home
