"""A strict config (SPEC §3 `llmtap config`): every command refuses a config file with an
unknown table or key, or a value of the wrong type, with one line naming the file, the
table, the key and the closest known name (exit 2, never a traceback); `llmtap config`
shows the effective settings with their sources, secrets masked; `config check FILE`
validates a file.

Each case runs the real console script, on a different command each time, so the sweep
also shows that every command reading the config refuses it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.helpers import CliResult, free_port, llmtap

CANARY = "CANARYpw7f3d"  # in every secret below: it must never be printed

# (config text, what the one line says after "<file>: ")
MISSPELT = [
    ('[auht]\nsearch = "a-long-password"\n', "[auht] is not a known table (did you mean [auth]?)"),
    ("[budgtes.teams]\nsearch = { usd = 5 }\n", "[budgtes] is not a known table (did you mean [budgets]?)"),
    (
        "[budgets]\nenforse = true\n[budgets.teams]\nsearch = { usd = 5 }\n",
        "[budgets] enforse is not a known key (did you mean enforce?)",
    ),
    ('bodie = "full"\n', "bodie is not a known key (did you mean bodies?)"),
    ("db = 5\n", "db must be text, not 5"),
]
WRONG_TYPE = [
    ('bodies = "all"\n', "bodies must be one of 'none', 'metadata' or 'full', not 'all'"),
    ("spool = 3\n", "spool must be text, not 3"),
    ('[teams]\n"9f2c41d0" = 5\n', "[teams] 9f2c41d0 must be text, not 5"),
    ("[teams]\nsearch = [1]\n", "[teams] search must be text, not a list"),
    ("[auth]\nsearch = 5\n", "[auth] search must be text, not 5"),
    ("auth = 5\n", "[auth] must be a table, not 5"),
    ('[proxy]\nport = "8080"\n', "[proxy] port must be a whole number or false, not '8080'"),
    (
        '[[proxy.reverse]]\nprovider = "anthropic"\nport = "x"\n',
        "[[proxy.reverse]] #1 port must be a whole number, not 'x'",
    ),
    ('[metrics]\nteams = "many"\n', "[metrics] teams must be a whole number, not 'many'"),
    ("[otlp]\nmax_queue = true\n", "[otlp] max_queue must be a whole number, not true"),
    (
        '[budgets]\nenforce = "yes"\n[budgets.teams]\nsearch = { usd = 5 }\n',
        "[budgets] enforce must be true or false, not 'yes'",
    ),
    (
        '[budgets.teams]\nsearch = { usd = "lots" }\n',
        "[budgets.teams] search.usd must be a positive number of dollars, not 'lots'",
    ),
    (
        '[budgets]\ntz = "Europe/Atlantis"\n[budgets.teams]\nsearch = { usd = 5 }\n',
        "[budgets] tz must be an IANA time zone such as Europe/Berlin or UTC, not 'Europe/Atlantis'",
    ),
    ("[lake]\nwarehouse = 5\n", "[lake] warehouse must be text, not 5"),
    ('[[providers]]\nname = "acme"\nhosts = "llm.acme"\n', "[[providers]] #1 hosts must be a list, not 'llm.acme'"),
    ('[lake]\n"s3.region" = ["eu"]\n', '[lake] "s3.region" must be text, not a list'),
]
UNKNOWN_KEY = [
    ('dbs = "sqlite://"\n', "dbs is not a known key (did you mean db?)"),
    ('[proxy]\nlisten_hots = "127.0.0.1"\n', "[proxy] listen_hots is not a known key (did you mean listen_host?)"),
    (
        '[[proxy.reverse]]\nprovider = "anthropic"\nport = 8081\nteem = "a"\n',
        "[[proxy.reverse]] #1 teem is not a known key (did you mean team?)",
    ),
    ('[metrics]\nlisen = "127.0.0.1:9464"\n', "[metrics] lisen is not a known key (did you mean listen?)"),
    ('[otlp]\nendpoints = "http://c:4318"\n', "[otlp] endpoints is not a known key (did you mean endpoint?)"),
    (
        '[budgets.teams]\nsearch = { usd = 5, perod = "day" }\n',
        "[budgets.teams] search.perod is not a known key (did you mean search.period?)",
    ),
    ("[budgets.team]\nsearch = { usd = 5 }\n", "[budgets.team] is not a known table (did you mean [budgets.teams]?)"),
    (
        '[budgets]\nwebhook_fromat = "slack"\n[budgets.teams]\nsearch = { usd = 5 }\n',
        "[budgets] webhook_fromat is not a known key (did you mean webhook_format?)",
    ),
    ('[lake]\n"s3.regoin" = "eu-west-1"\n', '[lake] "s3.regoin" is not a known key (did you mean "s3.region"?)'),
    (
        '[[providers]]\nname = "acme"\nhosts = ["llm.acme.internal"]\nhost = "x"\n',
        "[[providers]] #1 host is not a known key (did you mean hosts?)",
    ),
]


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("config")
    (root / "empty.har").write_text('{"log": {"version": "1.2", "entries": []}}')
    return root


def commands(root: Path) -> list[tuple[str, ...]]:
    """Every command that reads the config file, each as a call that would succeed (or fail
    later, for its own reasons) with a good one."""
    return [
        ("log",),
        ("proxy", "--no-regular", "--reverse", f"anthropic={free_port()}"),
        ("report", "usage"),
        ("report", "budgets"),
        ("export", "--format", "jsonl"),
        ("import", str(root / "empty.har")),
        ("dashboard", "-o", str(root / "d.html")),
        ("prune", "--older-than", "30d", "--dry-run"),
        ("reprocess",),
        ("reprice",),
        ("fingerprint",),
        ("db", "upgrade"),
        ("lake", "sync", "--warehouse", str(root / "lake")),
        ("show", "1"),
        ("config",),
    ]


def run_with(root: Path, name: str, text: str, command: tuple[str, ...]) -> tuple[Path, CliResult]:
    config = root / f"{name}.toml"
    config.write_text(text)
    db = f"sqlite:///{root / 'store.db'}"
    env = {"LLMTAP_HOME": str(root / "home"), "LLMTAP_CONFIG": None}
    # a proxy that took the file would run: a minute is long enough to say it did
    return config, llmtap(*command, "--config", str(config), "--db", db, env=env, process=True, timeout=60)


def assert_refused(result: CliResult, config: Path, says: str) -> None:
    assert result.code == 2, (result.code, result.out, result.err)
    assert result.err.count("\n") == 1 and "Traceback" not in result.err, result.err
    assert result.err == f"llmtap: error: {config}: {says}\n"


@pytest.mark.parametrize("case", MISSPELT, ids=[c[1][:40] for c in MISSPELT])
def test_the_proxy_refuses_a_misspelt_config(place: Path, case: tuple[str, str]) -> None:
    """The finding's own cases: the proxy ran without authentication or enforcement, and
    `db = 5` was an internal error (exit 70) wherever `--db` did not say otherwise."""
    text, says = case
    config, result = run_with(place, f"proxy{MISSPELT.index(case)}", text, commands(place)[1])
    assert_refused(result, config, says)


SWEEP = [*WRONG_TYPE, *UNKNOWN_KEY, MISSPELT[-1]]


@pytest.mark.parametrize(("number", "case"), list(enumerate(SWEEP)), ids=[c[1][:40] for c in SWEEP])
def test_every_command_refuses_a_bad_config_in_one_line(place: Path, number: int, case: tuple[str, str]) -> None:
    """A wrong type and an unknown key in each table, each through another command."""
    text, says = case
    every = commands(place)
    config, result = run_with(place, f"case{number}", text, every[number % len(every)])
    assert_refused(result, config, says)


# -- llmtap config -----------------------------------------------------------------------------


SECRETS_CONFIG = f"""\
db = "postgresql://llmtap:{CANARY}@db.internal/llmtap"
spool = "{{spool}}"
[auth]
search = "{CANARY}-search"
[otlp]
endpoint = "http://collector:{CANARY}@127.0.0.1:4318"
headers = {{ authorization = "Bearer {CANARY}" }}
[budgets]
webhook = "https://hook:{CANARY}@alerts.example/in"
[budgets.teams]
search = {{ usd = 5, period = "day" }}
[lake]
warehouse = "s3://analytics/llmtap"
"s3.region" = "eu-west-1"
"s3.access-key-id" = "AKIA{CANARY}"
"s3.secret-access-key" = "{CANARY}secret"
"""


def _rows(result: CliResult) -> dict[str, dict[str, object]]:
    assert result.code == 0, result.err
    return {row["setting"]: row for row in json.loads(result.out)}


def test_config_shows_each_setting_and_its_source(place: Path) -> None:
    config = place / "sources.toml"
    spool = place / "spool-here"
    config.write_text(f'bodies = "none"\nspool = "{spool}"\n[proxy]\nlisten_host = "127.0.0.2"\n')
    env = {"LLMTAP_HOME": str(place / "home"), "LLMTAP_CONFIG": str(config), "LLMTAP_BODIES": "full"}
    db = f"sqlite:///{place / 'flag.db'}"
    rows = _rows(llmtap("config", "--format", "json", "--db", db, env=env, process=True))
    assert (rows["db"]["value"], rows["db"]["source"]) == (db, "flag --db")
    assert (rows["bodies"]["value"], rows["bodies"]["source"]) == ("full", "env LLMTAP_BODIES")
    assert (rows["spool"]["value"], rows["spool"]["source"]) == (str(spool), f"file {config}:2")
    assert (rows["proxy.listen_host"]["value"], rows["proxy.listen_host"]["source"]) == (
        "127.0.0.2",
        f"file {config}:4",
    )
    assert (rows["proxy.port"]["value"], rows["proxy.port"]["source"]) == (8080, "default")
    assert (rows["config"]["value"], rows["config"]["source"]) == (str(config), "env LLMTAP_CONFIG")
    assert rows["secret_file"]["source"] == "default"
    table = llmtap("config", "--db", db, env={**env, "COLUMNS": "200"}, process=True)
    assert table.code == 0, table.err
    assert re.search(r"bodies\s.*full\s.*env LLMTAP_BODIES", table.out), table.out


def test_config_masks_every_secret(place: Path) -> None:
    config = place / "secrets.toml"
    config.write_text(SECRETS_CONFIG.replace("{spool}", str(place / "spool")))
    env = {"LLMTAP_HOME": str(place / "home"), "LLMTAP_CONFIG": None, "COLUMNS": "200"}
    shown = []
    for form in ("table", "json"):
        result = llmtap("config", "--config", str(config), "--format", form, env=env, process=True)
        assert result.code == 0, result.err
        shown.append(result.out + result.err)
    assert all(CANARY not in text for text in shown), shown
    rows = _rows(llmtap("config", "--config", str(config), "--format", "json", env=env, process=True))
    assert rows["auth.search"]["value"] == "***"
    assert rows["db"]["value"] == "postgresql://llmtap:***@db.internal/llmtap"
    assert rows["otlp.headers.authorization"]["value"] == "***"
    assert rows['lake."s3.secret-access-key"']["value"] == "***"
    assert rows['lake."s3.region"']["value"] == "eu-west-1"
    assert rows["budgets.teams.search.usd"]["value"] == "5"
    assert "***" in str(rows["budgets.webhook"]["value"])


def test_config_check(place: Path) -> None:
    good = place / "good.toml"
    good.write_text(SECRETS_CONFIG.replace("{spool}", str(place / "spool")))
    result = llmtap("config", "check", str(good), process=True)
    assert (result.code, result.out) == (0, f"{good}: ok\n"), result.err
    assert CANARY not in result.out + result.err
    bad = place / "bad.toml"
    bad.write_text('[auht]\nsearch = "pw"\n')
    assert_refused(llmtap("config", "check", str(bad), process=True), bad, MISSPELT[0][1])
    missing = llmtap("config", "check", str(place / "nowhere.toml"), process=True)
    assert missing.code == 2 and missing.err.count("\n") == 1 and "does not exist" in missing.err
    broken = place / "broken.toml"
    broken.write_text("[auth\n")
    result = llmtap("config", "check", str(broken), process=True)
    assert result.code == 2 and result.err.count("\n") == 1 and str(broken) in result.err


def test_a_wrong_password_type_never_echoes_a_secret(place: Path) -> None:
    """A value that fails its check is quoted in the error, unless it is a secret."""
    config = place / "secret-value.toml"
    config.write_text(f'[otlp]\nendpoint = "http://c:4318"\nheaders = {{ authorization = ["{CANARY}"] }}\n')
    result = llmtap("config", "check", str(config), process=True)
    assert result.code == 2 and CANARY not in result.err and "[otlp.headers] authorization must be text" in result.err
