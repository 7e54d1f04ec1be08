"""Storage fixtures: a database URL for SQLite (a temporary file) and, when
`LLMTAP_TEST_POSTGRES_URL` is set, PostgreSQL (a fresh database per test, dropped after);
an LLMTAP_HOME per test; engines that are disposed of when the test ends."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from llmtap.storage.engine import make_engine
from llmtap.storage.migrate import upgrade
from tests.storage.helpers import POSTGRES_URL, fresh_postgres_database

needs_postgres = pytest.mark.skipif(not POSTGRES_URL, reason="LLMTAP_TEST_POSTGRES_URL is not set")

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgresql", id="postgresql", marks=needs_postgres),
]


@pytest.fixture(autouse=True)
def own_home(llmtap_home: Path) -> Path:
    """Every storage test gets an LLMTAP_HOME of its own: spools live there."""
    return llmtap_home


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A blank database: a SQLite file, or a PostgreSQL database created for this test."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.db'}"
        return
    with fresh_postgres_database() as url:
        yield url


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A blank PostgreSQL database, for the tests only PostgreSQL can run."""
    if not POSTGRES_URL:
        pytest.skip("LLMTAP_TEST_POSTGRES_URL is not set")
    with fresh_postgres_database() as url:
        yield url


@pytest.fixture
def engines() -> Iterator[Callable[..., Engine]]:
    """`engines(url, **kw)` makes an engine that is disposed of at the end of the test."""
    made: list[Engine] = []

    def make(url: str, **kwargs) -> Engine:
        engine = make_engine(url, **kwargs)
        made.append(engine)
        return engine

    yield make
    for engine in made:
        engine.dispose()


@pytest.fixture
def store(db_url: str, engines: Callable[..., Engine]) -> Engine:
    """An engine on a database already at the head revision."""
    engine = engines(db_url)
    upgrade(engine)
    return engine


@pytest.fixture
def spool_dir(tmp_path: Path) -> Path:
    return tmp_path / "spool"
