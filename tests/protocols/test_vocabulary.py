"""protocols/vocabulary.py against everything else that spells its words: SPEC.md's lists
(where SPEC lists a vocabulary; the known differences are written out below and checked
to still be differences), the CLI's choices, the dashboard's generated vocabulary.js, and
every quoted word the SQL compares a status, cause, verdict or reason column with.

SPEC.md lives outside the repository (`shared/SPEC.md` beside or above the checkout, or
the file `LLMTAP_SPEC` names); without it the SPEC tests skip, one line each.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest

from llmtap.cli import main as cli_main
from llmtap.protocols import vocabulary as v
from llmtap.protocols import vocabulary_js

ROOT = Path(__file__).resolve().parents[2]


# -- the module itself --------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(v.ALL))
def test_each_vocabulary_is_distinct_snake_case_words(name: str) -> None:
    values = v.ALL[name]
    assert values and len(set(values)) == len(values), values
    assert all(re.fullmatch(r"[a-z][a-z_]*[a-z]", value) for value in values), values


def test_no_word_means_two_things_across_the_call_vocabularies() -> None:
    # a tool_problems entry and a call share the `status` column name in reports
    assert not set(v.TOOL_STATUSES) & set(v.TOOL_PROBLEMS)
    assert v.NO_FINISH not in v.FINISH_REASONS


# -- the dashboard's copy -----------------------------------------------------------------


def test_the_committed_vocabulary_js_is_the_generated_one() -> None:
    committed = resources.files("llmtap.dashboards").joinpath("vocabulary.js").read_text(encoding="utf-8")
    assert committed == vocabulary_js.javascript(), (
        "dashboards/vocabulary.js is stale: python -m llmtap.protocols.vocabulary_js > dashboards/vocabulary.js"
    )


def test_vocabulary_js_holds_every_vocabulary_when_run() -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("no node to run dashboards/vocabulary.js")
    script = vocabulary_js.javascript() + "process.stdout.write(JSON.stringify(LlmtapVocabulary));"
    ran = subprocess.run([node, "-e", script], capture_output=True, text=True, timeout=60, check=True)
    loaded = json.loads(ran.stdout)
    assert loaded == {**{name: list(values) for name, values in v.ALL.items()}, "NO_FINISH": v.NO_FINISH}


# -- the CLI ------------------------------------------------------------------------------


def _subparser(parser: object, name: str) -> object:
    import argparse

    assert isinstance(parser, argparse.ArgumentParser)
    (action,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[name] if name else action


def _choices(parser: object, option: str) -> tuple[str, ...]:
    import argparse

    assert isinstance(parser, argparse.ArgumentParser)
    (action,) = (a for a in parser._actions if option in a.option_strings)
    return tuple(action.choices or ())


def test_report_kinds_are_the_cli_report_subcommands() -> None:
    import argparse

    report = _subparser(cli_main.build_parser("report"), "report")
    kinds = _subparser(report, "")
    assert isinstance(kinds, argparse._SubParsersAction)
    assert tuple(kinds.choices) == v.REPORT_KINDS


def test_log_filters_offer_every_problem_and_cause() -> None:
    log = _subparser(cli_main.build_parser("log"), "log")
    not_valid = tuple(status for status in v.TOOL_STATUSES if status != "valid")
    assert _choices(log, "--tool-problem") == ("any", *not_valid, *v.TOOL_PROBLEMS)
    assert _choices(log, "--cache-miss") == ("any", *v.MISS_CAUSES)


# -- the SQL ------------------------------------------------------------------------------

# The columns whose quoted values are vocabulary words, by name (with or without a table
# alias). `status` is both a tool call's and a tool_problems entry's; the HTTP status is a
# number and never quoted. A finish reason is compared with NO_FINISH where SQL names null.
COLUMNS: dict[str, tuple[str, ...]] = {
    "status": (*v.TOOL_STATUSES, *v.TOOL_PROBLEMS),
    "cause": v.MISS_CAUSES,
    "cache_cause": v.MISS_CAUSES,
    "cache_miss": v.MISS_CAUSES,
    "cache_verdict": v.CACHE_VERDICTS,
    "verdict": v.CACHE_VERDICTS,
    "finish_reason": (*v.FINISH_REASONS, v.NO_FINISH),
    "price_status": v.PRICE_STATUSES,
    "price_reason": v.PRICE_REASONS,
}
_NAME = "|".join(sorted(COLUMNS, key=len, reverse=True))
_COLUMN = rf"(?<![\w$.])(?:\w+\.)?({_NAME})\b"  # a column, not a $parameter
_WORD = r"'([^']*)'"
_COMPARED = (
    re.compile(rf"{_COLUMN}\s*(?:=|<>|!=)\s*{_WORD}", re.IGNORECASE),
    re.compile(rf"{_WORD}\s*(?:=|<>|!=)\s*{_COLUMN}", re.IGNORECASE),
    re.compile(rf"\bcoalesce\(\s*{_COLUMN}\s*,\s*{_WORD}\s*\)", re.IGNORECASE),
    re.compile(rf"{_WORD}\s+AS\s+({_NAME})\b", re.IGNORECASE),
)
_IN = re.compile(rf"{_COLUMN}\s+(?:NOT\s+)?IN\s*\(([^)]*)\)", re.IGNORECASE)
_CASE = re.compile(rf"\bCASE\b|\bEND\b(?:\s+AS\s+(\w+))?|\b(?:THEN|ELSE)\s+{_WORD}", re.IGNORECASE)


def compared_words(sql: str) -> Iterator[tuple[str, str]]:
    """(column, word) for each quoted word the SQL compares a vocabulary column with,
    gives one as its value (`'x' AS status`, a CASE's THEN and ELSE under `END AS cause`)
    or substitutes for its null (`coalesce(finish_reason, 'unknown')`)."""
    sql = re.sub(r"--[^\n]*", "", sql)
    for pattern in _COMPARED:
        for match in pattern.finditer(sql):
            first, second = match.groups()
            column, word = (first, second) if first.lower() in COLUMNS else (second, first)
            yield column.lower(), word
    for match in _IN.finditer(sql):
        for word in re.findall(_WORD, match.group(2)):
            yield match.group(1).lower(), word
    stack: list[list[str]] = []
    for match in _CASE.finditer(sql):
        token = match.group(0).split()[0].upper()
        if token == "CASE":
            stack.append([])
        elif token == "END" and stack:
            words = stack.pop()
            alias = (match.group(1) or "").lower()
            if alias in COLUMNS:
                yield from ((alias, word) for word in words)
        elif token in ("THEN", "ELSE") and stack:
            stack[-1].append(match.group(2))


def _sql_texts() -> Iterator[tuple[str, str]]:
    """Each .sql file of analytics/, and each Python module that spells SQL beside the
    store's readers (its single-quoted words are SQL's: the house style quotes Python
    strings with double quotes)."""
    for path in sorted((ROOT / "analytics" / "sql").glob("*.sql")):
        yield path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8")
    for folder in ("analytics", "storage", "telemetry", "lake", "dashboards", "cli"):
        for path in sorted((ROOT / folder).glob("*.py")):
            yield path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8")


def test_the_extractor_finds_each_way_sql_spells_a_word() -> None:
    sql = """
    SELECT count(*) FILTER (WHERE t.status = 'valid') AS a,  -- price_status = 'commented'
           coalesce(finish_reason, 'unknown') AS finish_reason, 'orphan_result' AS status,
           CASE WHEN x THEN 'hit' WHEN y THEN CASE z WHEN '1h' THEN 1 END ELSE 'miss' END AS cache_verdict,
           CASE WHEN x THEN 'other' END AS actual
    FROM e WHERE 'priced' <> price_status AND e.price_reason IN ('unverified_host', 'nope')
      AND ($status = 'error' OR m.cause <> 'below_minimum')
    """
    assert sorted(compared_words(sql)) == [
        ("cache_verdict", "hit"),
        ("cache_verdict", "miss"),
        ("cause", "below_minimum"),
        ("finish_reason", "unknown"),
        ("price_reason", "nope"),
        ("price_reason", "unverified_host"),
        ("price_status", "priced"),
        ("status", "orphan_result"),
        ("status", "valid"),
    ]


def test_every_word_the_sql_compares_a_column_with_is_in_its_vocabulary() -> None:
    found, strays = 0, []
    for where, text in _sql_texts():
        for column, word in compared_words(text):
            found += 1
            if word not in COLUMNS[column]:
                strays.append(f"{where}: {column} = {word!r}")
    assert not strays, "words the vocabulary lacks:\n" + "\n".join(strays)
    assert found >= 25  # tools.sql, cache.sql, cost.sql… (29 when written: the extractor found them)


# -- SPEC.md ------------------------------------------------------------------------------


def _spec_path() -> Path | None:
    named = os.environ.get("LLMTAP_SPEC")
    if named:
        return Path(named)
    for folder in ROOT.parents:
        if (folder / "shared" / "SPEC.md").is_file():
            return folder / "shared" / "SPEC.md"
    return None


@pytest.fixture(scope="module")
def spec() -> str:
    path = _spec_path()
    if path is None or not path.is_file():
        pytest.skip("no SPEC.md (shared/SPEC.md above the checkout, or LLMTAP_SPEC)")
    return path.read_text(encoding="utf-8")


def section(spec: str, number: int) -> str:
    (found,) = re.findall(rf"^## {number}\. .*?(?=^## |\Z)", spec, re.MULTILINE | re.DOTALL)
    return str(found)


def between(text: str, start: str, end: str) -> str:
    """The text after `start` up to the first `end`; fails (SPEC reworded) when absent."""
    at = text.find(start)
    assert at >= 0, f"SPEC no longer says {start!r}: update this test's reading of it"
    stop = text.find(end, at + len(start))
    assert stop >= 0, f"SPEC has no {end!r} after {start!r}"
    return text[at + len(start) : stop]


def ticked(text: str) -> list[str]:
    """The `backticked` words of `text`, leaving out those inside (parentheses)."""
    return re.findall(r"`([a-z_]+)`", re.sub(r"\([^()]*\)", "", text))


# SPEC's lists that leave out a word the code has, each word with why. Each is checked to
# be missing still, so a SPEC that gains the word fails here until the entry goes.
NOT_IN_SPEC: dict[str, dict[str, str]] = {
    "§3 report cache --list causes": {
        "unexplained": "a miss that none of the six causes explains (protocols/rules.py's last resort)"
    },
    "§5 cache miss causes": {"unexplained": "as in §3"},
    "§5 tool statuses": {"unchecked": "SPEC §5 names it in its own bullet (checked below), not in the list"},
    "§3 report kinds": {
        "budgets": "`report budgets` (cli/report_budgets.py): spend against the config's [budgets]",
        "whatif": "`report whatif` (cli/report_whatif.py): the traffic at another model's prices",
    },
    "§4 price reasons": {"unknown_model": "the pricer's reason for a model without a price (analytics/pricing.py)"},
}


def check(name: str, spec_words: list[str], vocabulary: tuple[str, ...]) -> None:
    missing = NOT_IN_SPEC.get(name, {})
    assert set(spec_words) == set(vocabulary) - set(missing), name
    assert len(spec_words) == len(set(spec_words)), name
    assert not set(missing) & set(spec_words), f"SPEC now lists {set(missing) & set(spec_words)}: drop them here"


def test_finish_reasons(spec: str) -> None:
    words = ticked(between(section(spec, 2), "### Canonical finish reasons", "\n\n- "))
    assert tuple(words) == v.FINISH_REASONS  # the same order too


def test_tool_statuses_of_section_5(spec: str) -> None:
    text = section(spec, 5)
    check("§5 tool statuses", ticked(between(text, "Every tool call gets one status:", "; the first")), v.TOOL_STATUSES)
    bound = between(text, "A tool check that cannot finish within its bound", "\n- ")
    assert ticked(bound) == ["unchecked"]


def test_tool_problems_of_section_5(spec: str) -> None:
    text = between(section(spec, 5), "Across a\n  conversation:", "\n- ")
    check("§5 tool problems", re.findall(r"`([a-z_]+)`", text), v.TOOL_PROBLEMS)


def test_tools_list_statuses_of_section_3(spec: str) -> None:
    text = between(section(spec, 3), "`llmtap report tools --list`", "`detail`")
    words = re.findall(r"`([a-z_]+)`", between(text, "`status` (", ")"))
    not_valid = tuple(status for status in v.TOOL_STATUSES if status != "valid")
    check("§3 report tools --list statuses", words, (*not_valid, *v.TOOL_PROBLEMS))


def test_cache_list_causes_of_section_3(spec: str) -> None:
    text = between(section(spec, 3), "`llmtap report cache --list`", "`extra_cost_usd`")
    words = re.findall(r"`([a-z_]+)`", between(text, "`cause` (one of", ")"))
    check("§3 report cache --list causes", words, v.MISS_CAUSES)


def test_cache_causes_of_section_5(spec: str) -> None:
    # SPEC gives the order of the misses' causes with below_minimum last; rules.py tries
    # it first, as it makes a `not_cacheable` rather than a miss: the sets agree.
    text = between(section(spec, 5), "names its likely cause, first", "\n- ")
    check("§5 cache miss causes", ticked(text), v.MISS_CAUSES)


def test_cache_verdicts_of_section_5(spec: str) -> None:
    text = between(section(spec, 5), "cache verdict (", ")")
    words = [part.split()[0].strip("`") for part in text.split(",")]
    check("§5 cache verdicts", words, v.CACHE_VERDICTS)


def test_price_statuses_of_section_3(spec: str) -> None:
    words = re.findall(r"`([a-z_]+)`", between(section(spec, 3), "`price_status` (", ")"))
    check("§3 price statuses", words, v.PRICE_STATUSES)


def test_price_reasons_of_section_4(spec: str) -> None:
    text = between(section(spec, 4), "`price_status = unpriced` and the reason", ",")
    check("§4 price reasons", ticked(text), v.PRICE_REASONS)


def test_report_kinds_of_section_3(spec: str) -> None:
    row = between(section(spec, 3), "| `llmtap report KIND` |", ";")
    check("§3 report kinds", ticked(row), v.REPORT_KINDS)
