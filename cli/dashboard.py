"""`llmtap dashboard`: write one self-contained HTML file (0600: it holds prompts and
answers), or `--serve` it live on 127.0.0.1 (another address only when `--host` says so).
The server asks for a token off loopback, and on loopback when the store is private to
its user (storage/access.py): LLMTAP_DASHBOARD_TOKEN, or one made and printed in the URL.

The last `llmtap reconcile` results made for the same store, when there are any, are the
page's reconcile section (`data["reconcile"]`).

Not responsible for who the server answers (`storage/access.py` decides, `dashboards/serve.py` checks)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from llmtap.cli import settings as settings_module
from llmtap.cli.errors import UsageError
from llmtap.cli.timeargs import moment
from llmtap.storage.private import open_private


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "dashboard",
        help="write the dashboard as one offline HTML file, or serve it live",
        description="Charts of tokens and cost per team and day, cache hit rate and misses, "
        "finish reasons, tool calls, errors and latency.",
    )
    parser.add_argument("-o", "--output", default="llmtap-dashboard.html", metavar="FILE", help="file to write")
    parser.add_argument("--serve", action="store_true", help="serve it live instead of writing a file")
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to serve on (default 127.0.0.1); off loopback, or over a store private to its user, "
        "it asks for a token: LLMTAP_DASHBOARD_TOKEN, or one is made and printed in the URL",
    )
    parser.add_argument("--port", type=int, default=8765, help="port to serve on (default 8765)")
    parser.add_argument("--since", help="ISO date/time or age (7d)")
    parser.add_argument("--until", help="ISO date/time or age")
    parser.add_argument(
        "--tz",
        metavar="ZONE",
        help="IANA time zone the page's days, hours and times are in (default UTC)",
    )
    parser.add_argument(
        "--lake",
        metavar="WAREHOUSE",
        help="draw from the lake `llmtap lake sync` keeps there, plus the store's rows not synced yet",
    )
    settings_module.add_common(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from llmtap.analytics.reprice import reprice
    from llmtap.cli.pricing import pricer_for
    from llmtap.cli.report import lake_damage, lake_file_settings
    from llmtap.cli.store import open_store, say_what_waits
    from llmtap.dashboards import data, page

    since, until = moment(args.since), moment(args.until)
    args.zone = _zone(args.tz)
    settings = settings_module.load(args)
    engine = open_store(settings)
    say_what_waits(settings)
    pricer = pricer_for(settings, engine)
    reprice(engine, pricer)
    url = engine.url.render_as_string(hide_password=False)
    label = engine.url.render_as_string(hide_password=True)
    args.lake_kwargs = {"lake": args.lake, "lake_settings": lake_file_settings(args, settings), "tz": args.zone.key}
    if not args.serve:
        with lake_damage(args.lake):
            collected = data.collect(url, since, until, **args.lake_kwargs)
        collected["reconcile"] = _reconciled(url, say=True)
        html = page.render(collected, store=label)
        try:
            with open_private(args.output, "w", encoding="utf-8") as handle:
                handle.write(html)
        except OSError as exc:
            raise UsageError(f"cannot write {args.output!r}: {exc.strerror or exc}") from None
        print(f"dashboard written to {Path(args.output).resolve()}")
        return 0
    return _serve(args, engine, pricer, url, label, since, until)


def _serve(args, engine, pricer, url, label, since, until) -> int:
    from llmtap.analytics.reprice import reprice
    from llmtap.dashboards import data, page
    from llmtap.dashboards.freshness import Fresh, store_mark
    from llmtap.dashboards.serve import make_server
    from llmtap.storage.access import store_is_private

    # gathered again only when the store changed: at 1M exchanges a gathering takes seconds
    fresh = Fresh(lambda: data.collect(url, since, until, **args.lake_kwargs), lambda: store_mark(engine))

    def collect():
        reprice(engine, pricer)  # price what arrived since the last poll
        return {**fresh(), "reconcile": _reconciled(url)}  # two small files: read on every poll

    private = store_is_private(url)
    try:
        server = make_server(
            args.host,
            args.port,
            collect,
            lambda d: page.render(d, store=label, live=True),
            routes=_routes(engine, url, label, since, until, args.zone),
            token=os.environ.get("LLMTAP_DASHBOARD_TOKEN") or None,
            private=private,
        )
    except OSError as exc:
        raise UsageError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
    print(f"dashboard on {server.url} (Ctrl-C stops)", file=sys.stderr)
    if server.any_address:
        print("  it is reachable from other machines: only with this token", file=sys.stderr)
    elif private:
        print(
            "  the store is private to its user: other local users cannot read it without this token", file=sys.stderr
        )
    _reconciled(url, say=True)  # after the address line, which scripts read first
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def _reconciled(url: str, say: bool = False) -> dict[str, Any]:
    """The last `llmtap reconcile` results made for this store (analytics/reconcile_saved.py),
    as the page's data carries them; with `say`, what was not shown, a line each on stderr."""
    from llmtap.analytics.reconcile_saved import load_saved, store_identity
    from llmtap.storage.engine import home

    loaded = load_saved(home(), store_identity(url))
    if say:
        for note in loaded.notes:
            print(f"llmtap: note: {note}", file=sys.stderr)
    return {"results": [saved.shown() for saved in loaded.saved], "notes": loaded.notes}


def _zone(name: str | None):
    from llmtap.analytics.reports import ReportError, zone

    try:
        return zone(name)
    except ReportError as exc:
        raise UsageError(str(exc)) from None


def _routes(engine, url, label, since, until, zone):
    """The served dashboard's other pages: one per exchange, one per conversation, and the
    filtered exchange list as JSON (the same filters as `llmtap log`), times in `zone`."""
    import json

    from llmtap.analytics import audit
    from llmtap.dashboards import data, page

    def html(text: str) -> tuple[int, str, bytes]:
        return 200, "text/html; charset=utf-8", text.encode("utf-8")

    def missing(exc: Exception) -> tuple[int, str, bytes]:
        return 404, "text/plain; charset=utf-8", f"{exc}\n".encode()

    def exchange(rest: str, query: dict[str, str]):
        try:
            return html(page.render_exchange(audit.show(engine, rest), store=label, zone=zone))
        except audit.NotFound as exc:
            return missing(exc)

    def conversation(rest: str, query: dict[str, str]):
        try:
            return html(page.render_conversation(audit.conversation(engine, rest), store=label, zone=zone))
        except audit.NotFound as exc:
            return missing(exc)

    def log_json(rest: str, query: dict[str, str]):
        def given(name: str) -> str | None:
            return query.get(name) or None

        filters = audit.LogFilters(
            team=given("team"),
            model=given("model"),
            provider=given("provider"),
            status=given("status"),
            finish=given("finish"),
            tool_problem=given("tool_problem"),
            cache_miss=given("cache_miss"),
            search=given("search"),
            since=since,
            until=until,
        )
        rows = audit.log(url, engine, filters, limit=data.EXCHANGES_SHOWN)
        details = audit.details(engine, [r["id"] for r in rows])
        out = [{**{k: data._plain(v, k, zone) for k, v in r.items()}, "detail": details.get(r["id"])} for r in rows]
        return 200, "application/json", json.dumps(out, default=str).encode()

    return {"exchange/": exchange, "conversation/": conversation, "log.json": log_json}
