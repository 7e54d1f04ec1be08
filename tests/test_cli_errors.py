"""Every user error is one line on stderr and exit status 2, never a traceback or an
`internal error`, and never shows a password (SPEC §3): bad dates, ages, database URLs and
file paths, table-driven over every command that takes them. The headline cases run the
real console script; the sweep runs the same `main` in-process."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers import CliResult, free_port, llmtap

SECRET = "S3CRETPW"
SECRET_URLS = (
    f"postgresql://u:{SECRET}@host:notaport/db",  # a port that is not a number
    f"postgresql://u:{SECRET}/x@y@host:notaport/db",  # a password with / and @ in it
    f"postgresql://u@host:notaport/db?password={SECRET}",
    f"mysql://u:{SECRET}@host/db",
    f"postgresql+psycopg2://u:{SECRET}@host/db",
)
AGES = ("99999999d", "9999999999999999999999w", "9" * 400 + "d", "7 fortnights", "-7d")
DATES = (*AGES, "9999-12-31T23:59:59-05:00", "0001-01-01T00:00:00+05:00", "2026-13-45", "yesterday")


@pytest.fixture(scope="module")
def where(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("cli-errors")
    (root / "somefile.txt").write_text("not a folder\n")
    (root / "folder").mkdir()
    (root / "empty.har").write_text('{"log": {"version": "1.2", "entries": []}}')
    return {
        "root": str(root),
        "file": str(root / "somefile.txt"),
        "folder": str(root / "folder"),
        "db": f"sqlite:///{root / 'store.db'}",
        "html": str(root / "dashboard.html"),
        "har": str(root / "empty.har"),
    }


def assert_one_line(result: CliResult, *words: str) -> None:
    assert result.code == 2, (result.code, result.out, result.err)
    assert result.err.startswith("llmtap: error: ") and result.err.count("\n") == 1, result.err
    assert "Traceback" not in result.err and "internal error" not in result.err
    assert SECRET not in result.out + result.err, result.err
    for word in words:
        assert word in result.err, (word, result.err)


# -- the findings, through the console script -----------------------------------------------


def test_db_under_a_regular_file_is_one_line(where):
    result = llmtap("log", "--db", f"sqlite:///{where['file']}/store.db", process=True)  # exit 70 before
    assert_one_line(result, "somefile.txt", "not a folder")


def test_huge_age_is_one_line(where):
    result = llmtap("log", "--since", "99999999d", "--db", where["db"], process=True)  # exit 70 before
    assert_one_line(result, "99999999d")


def test_malformed_db_url_does_not_echo_its_password():
    result = llmtap("log", "--db", f"postgresql://u:{SECRET}@host:notaport/db", process=True)  # exit 70, echoed
    assert_one_line(result, "postgresql://u:***@host:notaport/db")


# -- the sweep ------------------------------------------------------------------------------

DB_COMMANDS = (
    ("log",),
    ("show", "01M6B8TE80J24KQEM4TQ1S92PJ"),
    ("report", "usage"),
    ("report", "cost"),
    ("reprice",),
    ("export",),
    ("dashboard", "-o", "{html}"),
    ("prune", "--older-than", "30d"),
    ("reprocess",),
    ("db", "upgrade"),
    ("db", "current"),
    ("import", "{har}"),
)
TIME_COMMANDS = (("log",), ("report", "usage"), ("export",), ("dashboard", "-o", "{html}"))


def _args(command: tuple[str, ...], where: dict[str, str]) -> list[str]:
    return [part.format(**where) for part in command]


@pytest.mark.parametrize("command", DB_COMMANDS, ids=" ".join)
@pytest.mark.parametrize("url", SECRET_URLS, ids=range(len(SECRET_URLS)))
def test_bad_db_url(where, command, url):
    assert_one_line(llmtap(*_args(command, where), "--db", url))


@pytest.mark.parametrize("command", DB_COMMANDS, ids=" ".join)
@pytest.mark.parametrize("path", ("{file}/store.db", "{file}/deeper/store.db", "{folder}"), ids=("file", "deep", "dir"))
def test_db_path_that_cannot_be_a_store(where, command, path):
    assert_one_line(llmtap(*_args(command, where), "--db", "sqlite:///" + path.format(**where)), "as the store")


@pytest.mark.parametrize("command", DB_COMMANDS[:3], ids=" ".join)
def test_bad_db_url_from_env_and_config(where, command, tmp_path):
    url = SECRET_URLS[0]
    assert_one_line(llmtap(*_args(command, where), env={"LLMTAP_DB": url}))
    config = tmp_path / "config.toml"
    config.write_text(f'db = "{url}"\n')
    assert_one_line(llmtap(*_args(command, where), "--config", str(config)))


def test_proxy_refuses_a_bad_db_before_it_listens(where):
    for url in (SECRET_URLS[0], SECRET_URLS[3], f"sqlite:///{where['file']}/store.db"):
        result = llmtap("proxy", "--quiet", "--port", str(free_port()), "--db", url, process=True, timeout=60)
        assert_one_line(result)


# -- malformed URLs, generated (issue 24) -----------------------------------------------------


def malformed_urls() -> list[str]:
    """Every way of getting a database URL wrong that we know of, each carrying the canary
    password: each scheme with each shape of user info (a port that is no number, a broken
    IPv6 host, user info on SQLite, …), each scheme with each query that holds a password or
    a bad argument, and text that is no URL at all."""
    schemes = ("postgresql", "postgres", "postgresql+psycopg", "postgresql+psycopg2", "POSTGRESQL", "sqlite",
               "sqlite+pysqlite", "mysql", "bogus+x")  # fmt: skip
    userinfos = (f"u:{SECRET}", f":{SECRET}", f"u:{SECRET}:x", f"u:{SECRET}/x@y", f"u:{SECRET}%zz", f'u:"{SECRET}"',
                 f"u:{SECRET} x", f"u:{SECRET}\n", f"u:{SECRET}#", f"u:{SECRET}?", f"u%3A:{SECRET}")  # fmt: skip
    hosts = ("127.0.0.1:notaport", "[::1", "h h:1", "127.0.0.1:5432:5432", "127.0.0.1:-1")
    queries = (
        f"?password={SECRET}",
        f"?pass%77ord={SECRET}",
        f"?sslpassword={SECRET}",
        "?port=x",
        "?connect_timeout=x",
    )
    urls = [
        f"{scheme}://{userinfo}@{hosts[(i + j) % len(hosts)]}/db"
        for i, scheme in enumerate(schemes)
        for j, userinfo in enumerate(userinfos)
    ]
    urls += [f"{scheme}://u@127.0.0.1:notaport/db{query}" for scheme in schemes for query in queries]
    urls += [f"{scheme}://u:{SECRET}@/x" for scheme in ("sqlite", "sqlite+pysqlite")]  # exit 70 before
    urls += [f"postgresql://u:{SECRET}@h/db?host=/tmp&port=x"]  # exit 70 before
    urls += [f"u:{SECRET}@127.0.0.1/db", f"//u:{SECRET}@h/db", f"postgresql:/u:{SECRET}@h/db",
             f"postgresql:u:{SECRET}@h/db", f" postgresql://u:{SECRET}@h:x/db"]  # echoed before  # fmt: skip
    return urls


MALFORMED = malformed_urls()


@pytest.fixture
def in_empty_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The command runs in an empty folder, which must stay empty: `sqlite+pysqlite://u:pw@h/db`
    made a file `db` before it was refused."""
    folder = tmp_path / "cwd"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


@pytest.mark.parametrize("url", MALFORMED, ids=range(len(MALFORMED)))
def test_every_malformed_url_is_one_line_without_its_password(url, in_empty_folder):
    assert_one_line(llmtap("log", "--db", url))
    assert list(in_empty_folder.iterdir()) == []


@pytest.mark.parametrize("command", DB_COMMANDS, ids=" ".join)
def test_every_command_refuses_malformed_urls_in_one_line(where, command, in_empty_folder):
    """A share of the generated URLs for each command (every shape of user info meets every
    command across the sweep), and the ones that were internal errors or echoed, for all."""
    index = DB_COMMANDS.index(command)
    for url in [*MALFORMED[index :: len(DB_COMMANDS)], *MALFORMED[-8:]]:
        assert_one_line(llmtap(*_args(command, where), "--db", url))
    assert list(in_empty_folder.iterdir()) == []


def test_unknown_arguments_do_not_echo_a_password():
    assert_one_line(llmtap("demo", "--db", SECRET_URLS[0]), "unrecognized arguments")


@pytest.mark.parametrize("command", TIME_COMMANDS, ids=" ".join)
@pytest.mark.parametrize("flag", ("--since", "--until"))
@pytest.mark.parametrize("value", DATES)
def test_bad_date(where, command, flag, value):
    assert_one_line(llmtap(*_args(command, where), f"{flag}={value}", "--db", where["db"]))


@pytest.mark.parametrize("value", AGES)
def test_bad_age(where, value):
    assert_one_line(llmtap("prune", f"--older-than={value}", "--db", where["db"]))


@pytest.mark.parametrize(
    "args",
    [
        ("log", "--config", "{folder}"),
        ("log", "--config", "{root}/missing.toml"),
        ("log", "--config", "{file}/config.toml"),
        ("report", "cost", "--prices", "{folder}"),
        ("report", "cost", "--prices", "{root}/missing.toml"),
        ("reprice", "--prices", "{file}"),
        ("import", "{folder}"),
        ("import", "{root}/missing.har"),
        ("decode", "--response", "{folder}", "--path", "/v1/messages"),
        ("decode", "--response", "{root}/missing", "--path", "/v1/messages"),
        ("decode", "--response", "{file}", "--path", "/v1/messages", "--request", "{folder}"),
        ("export", "-o", "{folder}"),
        ("export", "--format", "csv", "-o", "{file}/out.csv"),
        ("export", "--format", "parquet", "-o", "{root}/missing/out.parquet"),
        ("dashboard", "-o", "{folder}"),
        ("dashboard", "-o", "{file}/out.html"),
    ],
    ids=lambda args: " ".join(args),
)
def test_bad_file_path(where, args):
    store = [] if args[0] == "decode" else ["--db", where["db"]]  # decode reads no store
    assert_one_line(llmtap(*_args(args, where), *store))


def test_messages_are_one_line_without_control_characters(where):
    # What a user typed, quoted back, is shown: a newline or an ESC in it is not acted on.
    result = llmtap("log", "--since", "x\n\x1b[2Jforged", "--db", where["db"])
    assert_one_line(result)
    assert "\x1b" not in result.err


def test_no_password_in_a_driver_message():
    if not os.environ.get("LLMTAP_TEST_POSTGRES_URL"):
        pytest.skip("LLMTAP_TEST_POSTGRES_URL is not set")
    # A server that exists, a database that does not: psycopg's own message, one line.
    url = f"postgresql://postgres:{SECRET}@127.0.0.1:5432/llmtap_no_such_database"
    assert_one_line(llmtap("log", "--db", url), "llmtap_no_such_database")


def test_a_password_in_a_path_like_url_is_not_mistaken(where):
    # A SQLite path holding ':' and '@' is a path, shown as it is.
    path = Path(where["file"]).parent / "a:b@c" / "store.db"
    Path(where["file"]).parent.joinpath("a:b@c").write_text("a file")
    result = llmtap("log", "--db", f"sqlite:///{path}")
    assert_one_line(result, "a:b@c")
