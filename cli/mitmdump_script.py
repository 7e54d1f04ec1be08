"""The llmtap recorder as a plain mitmproxy script, for people who run their own mitmdump:

    mitmdump -s "$(python -c 'import llmtap.cli.mitmdump_script as s; print(s.__file__)')" \
        --set llmtap_db=URL

It opens the writer (pricing rows as they are written) and the attribution maps from the
`llmtap_*` options the recorder declares. `llmtap proxy` does the same from its own
settings. Not responsible for hooks: those are the recorder's (llmtap.addon).
"""

from __future__ import annotations

import functools
import os
import tomllib
from pathlib import Path
from typing import Any

from llmtap.addon.attribution import Attribution
from llmtap.addon.recorder import Recorder
from llmtap.analytics.pricing import row_pricer
from llmtap.storage.engine import default_url, home, make_engine
from llmtap.storage.migrate import ensure_current
from llmtap.storage.store_secret import fingerprinter_for
from llmtap.storage.writer_process import WriterProcess, WriterSpec


def listener_teams(entries: list[str]) -> dict[int, str]:
    teams = {}
    for entry in entries:
        port, _, team = entry.partition("=")
        if port.strip().isdigit() and team.strip():
            teams[int(port)] = team.strip()
    return teams


def open_from_options(options: Any) -> tuple[WriterProcess, Attribution]:
    if options.llmtap_home:
        os.environ["LLMTAP_HOME"] = options.llmtap_home
    base = home()
    config: dict[str, Any] = {}
    if options.llmtap_config:
        config = tomllib.loads(Path(options.llmtap_config).expanduser().read_text())
    engine = make_engine(options.llmtap_db or config.get("db") or default_url())
    ensure_current(engine)
    # the store's secret, or refused (`secret_file` as `llmtap proxy` reads it)
    secret_file = os.environ.get("LLMTAP_SECRET_FILE") or config.get("secret_file") or base / "fingerprint.secret"
    fingerprinter = fingerprinter_for(engine, Path(secret_file).expanduser(), by="mitmdump")
    prices = config.get("prices")
    writer = WriterProcess(
        WriterSpec(
            url=engine.url.render_as_string(hide_password=False),
            spool_dir=Path(config.get("spool") or base / "spool"),
            body_mode=options.llmtap_bodies,
            enrich_factory=functools.partial(
                row_pricer, Path(prices).expanduser() if prices else None, engine.url.render_as_string(False)
            ),
            key_secret_id=fingerprinter.secret_id,
        )
    )
    engine.dispose()
    attribution = Attribution(
        fingerprinter=fingerprinter,
        key_teams=dict(config.get("teams") or {}),
        listener_teams=listener_teams(list(options.llmtap_listener_teams)),
    )
    return writer, attribution


addons = [Recorder(open_from_options=open_from_options)]
