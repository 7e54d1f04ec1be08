"""The llmtap recorder as a plain mitmproxy script, for people who run their own mitmdump:

    mitmdump -s "$(python -c 'import llmtap.cli.mitmdump_script as s; print(s.__file__)')" \
        --set llmtap_db=URL [--set llmtap_config=FILE] [--set llmtap_bodies=full]

It reads the same settings as `llmtap proxy` (cli/settings.py: `llmtap_db`, `llmtap_bodies`
and `llmtap_config` stand for the flags, then the environment, the config file and the
defaults) and opens the same things (cli/recording.py): the writer pricing rows as they
are written, `[teams]`, `[auth]` (a proxy request without a team's credentials gets 407),
`[budgets]` (a team over its limit gets 429), `[[providers]]`, `[metrics]` and `[otlp]`. A bad setting
stops mitmdump with the one-line error `llmtap` would print (exit status 2). An
upstream that fails is answered as `llmtap proxy` answers it (a 502 in the protocol's
shape, addon/answering.py); the 504 of a silent one needs `--set llmtap_upstream_timeout=SECONDS`
(off by default here: mitmdump's options are its own). `[proxy] access_log` prints the
access lines here too, and the last line says what the run wrote.
Not responsible for hooks: those are the recorder's (llmtap.addon).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, NoReturn

from llmtap.addon.script import Script
from llmtap.cli import recording
from llmtap.cli import settings as settings_module
from llmtap.cli.errors import UsageError, one_line
from llmtap.storage.errors import StoreError


def listener_teams(entries: list[str]) -> dict[int, str]:
    teams = {}
    for entry in entries:
        port, _, team = entry.partition("=")
        if port.strip().isdigit() and team.strip():
            teams[int(port)] = team.strip()
    return teams


def open_from_options(options: Any) -> recording.Recording:
    from llmtap.addon.proxy import ProxyOptionError, check_auth_modes
    from llmtap.cli.store import open_store
    from llmtap.storage.store_secret import fingerprinter_for

    if options.llmtap_home:
        os.environ["LLMTAP_HOME"] = options.llmtap_home
    flags = argparse.Namespace(
        db=options.llmtap_db or None, config=options.llmtap_config or None, bodies=options.llmtap_bodies or None
    )
    try:
        settings = settings_module.load(flags)
        if settings.auth:
            check_auth_modes(list(options.mode))
        engine = open_store(settings)
        fingerprinter = fingerprinter_for(engine, settings.secret_file, by="mitmdump")  # the store's, or refused
        url = engine.url.render_as_string(hide_password=False)
        engine.dispose()
        telemetry = recording.telemetry_for(settings, url)
        listeners = recording.Listeners(teams=listener_teams(list(options.llmtap_listener_teams)))
        access = settings.config.proxy.access_log  # [proxy] access_log: the line per exchange here too
        return recording.start(settings, url, telemetry, listeners, fingerprinter, access_log=access, say_left=False)
    except (UsageError, StoreError, ProxyOptionError) as exc:
        _stop(str(exc))


def _stop(message: str) -> NoReturn:
    """mitmproxy logs an addon's exception and runs on without it: a recorder that records
    nothing. Stop mitmdump instead, with the line `llmtap` would print."""
    print(f"llmtap: error: {one_line(message)}", file=sys.stderr, flush=True)
    raise SystemExit(2)


addons = [Script(open_from_options)]
