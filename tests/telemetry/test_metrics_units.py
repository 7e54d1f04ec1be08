"""The metrics' parts that need no proxy: `--metrics` and `[metrics]` settings (and the
one-line usage error for a bad one), the label caps, and the models' cache minimums.

Not responsible for the counters against the store (test_metrics_proxy.py) or the stored
cache verdicts they count (test_stored_verdicts.py).
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

from llmtap.protocols import rules
from llmtap.storage.rows import RowSet
from llmtap.telemetry import metrics
from llmtap.telemetry.metrics_labels import MAX_LENGTH, OTHER, UNKNOWN, Labels, bounded
from llmtap.telemetry.settings import Telemetry
from tests.helpers import llmtap

# -- settings ------------------------------------------------------------------------------


def test_the_flag_wins_over_the_table_and_the_caps_are_read() -> None:
    got = metrics.settings_from("127.0.0.1:9464", {"listen": "0.0.0.0:1", "teams": 7, "series": 99})
    assert got is not None
    assert (got.host, got.port, got.teams, got.series) == ("127.0.0.1", 9464, 7, 99)
    assert (got.models, got.unpriced_models) == (metrics.CAPS["models"], metrics.CAPS["unpriced_models"])
    assert got.run.split("-")[0].isdigit()
    assert metrics.settings_from(None, None) is None
    table = metrics.settings_from(None, {"listen": "[::1]:9000"})
    assert table is not None and (table.host, table.port) == ("::1", 9000)


@pytest.mark.parametrize(
    ("flag", "section", "says"),
    [
        ("9464", None, "HOST:PORT"),
        ("127.0.0.1:0", None, "HOST:PORT"),
        ("127.0.0.1:70000", None, "HOST:PORT"),
        (":9464", None, "HOST:PORT"),
        (None, {}, "needs listen"),
        (None, {"listen": 9464}, "listen must be text, not 9464"),
        (None, "yes", "must be a table"),
        ("127.0.0.1:9464", {"team": 5}, r"team is not a known key \(did you mean teams\?\)"),
        ("127.0.0.1:9464", {"teams": 0}, "teams must be above 0, not 0"),
        ("127.0.0.1:9464", {"series": True}, "series must be a whole number, not true"),
    ],
)
def test_a_bad_setting_is_one_line(flag: str | None, section: Any, says: str) -> None:
    with pytest.raises(ValueError, match=says) as raised:
        metrics.settings_from(flag, section)
    assert "\n" not in str(raised.value)


def test_a_bad_flag_is_a_usage_error_on_the_command_line() -> None:
    result = llmtap("proxy", "--metrics", "localhost", "--db", "sqlite://", process=True)
    assert result.code == 2
    assert "HOST:PORT" in result.err and len(result.err.strip().splitlines()) == 1


def test_a_taken_address_is_a_one_line_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = llmtap(
            "proxy", "--no-regular", "--reverse", "anthropic=0", "--db", f"sqlite:///{tmp_path / 'x.db'}",
            "--metrics", f"127.0.0.1:{port}", process=True,
        )  # fmt: skip
    assert result.code == 2
    assert result.err.strip() == f"llmtap: error: cannot serve metrics at 127.0.0.1:{port}: Address already in use"


def test_counting_that_cannot_start_never_stops_the_writer(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    spool = tmp_path / "spool"
    spool.write_text("a file where the spool folder should be")
    settings = metrics.settings_from("127.0.0.1:9464", None)
    telemetry = Telemetry(db_url="sqlite://", spool_dir=spool, metrics=settings)
    observer = metrics.observer(telemetry)
    observer.observe(RowSet(exchanges=[{"id": "x"}]))
    observer.close()
    assert "cannot count in" in caplog.text


# -- labels --------------------------------------------------------------------------------


def _labels(**caps: int) -> Labels:
    return Labels(**({"teams": 3, "models": 2, "unpriced_models": 1, "series": 1000} | caps))


def test_a_long_label_value_keeps_its_start_and_a_digest_of_the_whole() -> None:
    assert bounded("gpt-4o") == "gpt-4o"
    assert bounded("x" * MAX_LENGTH) == "x" * MAX_LENGTH
    one, two = bounded("x" * 5_000 + "1"), bounded("x" * 5_000 + "2")
    assert len(one) == len(two) == MAX_LENGTH and one != two
    assert one.startswith("x" * 100) and one == bounded("x" * 5_000 + "1")
    assert bounded("é" * 200 + "\ud800") == bounded("é" * 200 + "\ud800")  # any text, even a lone surrogate
    labels = _labels(teams=2)
    assert labels.team("t" * 1_000) == labels.team("t" * 1_000) == bounded("t" * 1_000)
    assert len(labels.model("m" * 1_000, False)) == MAX_LENGTH


def test_teams_past_the_cap_are_other_and_known_ones_keep_their_name() -> None:
    labels = _labels()
    assert [labels.team(f"t{n}") for n in range(5)] == ["t0", "t1", "t2", OTHER, OTHER]
    assert labels.team("t1") == "t1"
    assert labels.team(None) == OTHER  # the cap is full: even `unknown` is new
    assert _labels().team(None) == UNKNOWN


def test_providers_are_the_price_catalogues_and_finish_reasons_the_canonical_set() -> None:
    labels = _labels()
    assert [labels.provider(p) for p in ("anthropic", "openai", "aws", "evil.example.com", None)] == [
        "anthropic",
        "openai",
        "aws",
        OTHER,
        UNKNOWN,
    ]
    assert [labels.finish_reason(r) for r in ("end_turn", "tool_use", "STOP", None)] == [
        "end_turn",
        "tool_use",
        OTHER,
        UNKNOWN,
    ]
    assert [labels.tool_status(s) for s in ("invalid_json", "duplicate_id", None)] == ["invalid_json", OTHER, OTHER]


def test_providers_of_genai_prices_list_and_of_the_config_are_labels() -> None:
    labels = Labels(teams=3, models=2, unpriced_models=1, series=1000, providers=("acme-gw",))
    assert [labels.provider(p) for p in ("openrouter", "mistral", "x-ai", "acme-gw", "openrouter.ai")] == [
        "openrouter",
        "mistral",
        "x-ai",
        "acme-gw",
        OTHER,  # a host's name (rows stored before their host named a provider): not a label
    ]
    assert metrics.settings_from("127.0.0.1:9464", None, ("acme-gw",)).providers == ("acme-gw",)  # type: ignore[union-attr]


def test_priced_and_unpriced_models_have_caps_of_their_own() -> None:
    labels = _labels()
    got = [
        labels.model("gpt-4o", True),
        labels.model("made-up-1", False),
        labels.model("made-up-2", False),  # the unpriced cap (1) is full
        labels.model("claude-sonnet-4", True),
        labels.model("gpt-4.1", True),  # the priced cap (2) is full
        labels.model("made-up-1", False),
        labels.model(None, False),
    ]
    assert got == ["gpt-4o", "made-up-1", OTHER, "claude-sonnet-4", OTHER, "made-up-1", UNKNOWN]


def test_the_series_cap_folds_every_label_of_a_new_triple() -> None:
    labels = _labels(teams=100, series=2)
    assert labels.who("a", "openai", "gpt-4o", True) == ("a", "openai", "gpt-4o")
    assert labels.who("b", "openai", "gpt-4o", True) == ("b", "openai", "gpt-4o")
    assert labels.who("c", "openai", "gpt-4o", True) == (OTHER, OTHER, OTHER)
    assert labels.who("a", "openai", "gpt-4o", True) == ("a", "openai", "gpt-4o")


def test_values_a_dead_writer_gave_out_count_against_the_caps() -> None:
    labels = _labels(series=3)
    labels.seed([("t0", "openai", "gpt-4o"), ("t1", "openai", "gpt-4o"), ("t2", "anthropic", "x")])
    assert labels.team("t3") == OTHER
    assert labels.who("t0", "openai", "gpt-4o", True) == ("t0", "openai", "gpt-4o")
    assert labels.who("t0", "anthropic", "gpt-4o", True) == (OTHER, OTHER, OTHER)


# -- the cache minimums ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "tokens"),
    [
        ("claude-opus-4-5-20251101", 4096),
        ("us.anthropic.claude-3-haiku-20240307-v1:0", 2048),
        ("CLAUDE-SONNET-4", 1024),
        ("gemini-2.5-pro", 4096),
        ("gemini-2.5-flash", 1024),
        ("gpt-4o", 1024),
        (None, None),
    ],
)
def test_a_models_minimum_is_the_first_pattern_that_matches(model: str | None, tokens: int | None) -> None:
    assert rules.minimum(model) == tokens
