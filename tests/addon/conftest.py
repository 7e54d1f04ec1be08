"""Addon fixtures: a `Recorder` with a real writer on a temporary SQLite file, inside
mitmproxy's own test context (`mitmproxy.test.taddons`), and a way to read back rows."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

with warnings.catch_warnings():
    # mitmproxy's proxyauth addon imports ldap3, which uses pyasn1 names pyasn1 deprecates.
    warnings.filterwarnings("ignore", r"(tagMap|typeMap) is deprecated", DeprecationWarning)
    from mitmproxy.addons import proxyauth  # noqa: F401
from mitmproxy.test import taddons
from sqlalchemy import Engine, select

from llmtap.addon.attribution import Attribution
from llmtap.addon.recorder import Recorder
from llmtap.storage import bodies, schema
from llmtap.storage.engine import make_engine
from llmtap.storage.migrate import ensure_current
from llmtap.storage.secrets import KeyFingerprinter
from llmtap.storage.writer import Writer

LISTENER_PORT = 8081  # the port tflow's client connection says it came in on, as a listener
SECRET = b"0123456789abcdef0123456789abcdef"


@dataclass
class Rig:
    recorder: Recorder
    writer: Writer
    engine: Engine
    tctx: Any

    def rows(self) -> list[dict[str, Any]]:
        assert self.writer.flush(10), "the writer did not settle"
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(select(schema.exchanges).order_by(schema.exchanges.c.id))]

    def blobs(self) -> list[bytes]:
        """Every stored body blob, uncompressed (body mode `full`)."""
        with self.engine.connect() as conn:
            found = conn.execute(select(schema.bodies.c.data, schema.bodies.c.encoding))
            return [bodies.decompress(data, encoding) for data, encoding in found]

    def fingerprint(self, key: str) -> str:
        return KeyFingerprinter(SECRET).fingerprint(key)


@pytest.fixture(params=["metadata"])
def rig(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Rig]:
    """Body mode `metadata`; for another, parametrize indirectly:
    `@pytest.mark.parametrize("rig", ["full"], indirect=True)`."""
    engine = make_engine(f"sqlite:///{tmp_path / 'store.db'}")
    ensure_current(engine)
    writer = Writer(engine, spool_dir=tmp_path / "spool", max_delay=0.02, body_mode=request.param)
    attribution = Attribution(fingerprinter=KeyFingerprinter(SECRET), listener_teams={LISTENER_PORT: "listener-team"})
    recorder = Recorder(writer=writer, attribution=attribution)
    with taddons.context(recorder) as tctx:
        yield Rig(recorder, writer, engine, tctx)
    writer.close()
    engine.dispose()
