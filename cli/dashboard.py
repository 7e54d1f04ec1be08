"""`llmtap dashboard`: write one self-contained HTML file, or `--serve` it live on
127.0.0.1 (another address only when `--host` says so)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from llmtap.cli import settings as settings_module
from llmtap.cli.errors import UsageError
from llmtap.cli.timeargs import moment


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "dashboard",
        help="write the dashboard as one offline HTML file, or serve it live",
        description="Charts of tokens and cost per team and day, cache hit rate and misses, "
        "finish reasons, tool calls, errors and latency.",
    )
    parser.add_argument("-o", "--output", default="llmtap-dashboard.html", metavar="FILE", help="file to write")
    parser.add_argument("--serve", action="store_true", help="serve it live instead of writing a file")
    parser.add_argument("--host", default="127.0.0.1", help="address to serve on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8765, help="port to serve on (default 8765)")
    parser.add_argument("--since", help="ISO date/time or age (7d)")
    parser.add_argument("--until", help="ISO date/time or age")
    settings_module.add_common(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from llmtap.analytics.reprice import reprice
    from llmtap.cli.report import pricer_for
    from llmtap.cli.store import open_store
    from llmtap.dashboards import data, page

    since, until = moment(args.since), moment(args.until)
    settings = settings_module.load(args)
    engine = open_store(settings)
    pricer = pricer_for(settings)
    reprice(engine, pricer)
    url = engine.url.render_as_string(hide_password=False)
    label = engine.url.render_as_string(hide_password=True)
    if not args.serve:
        html = page.render(data.collect(url, since, until), store=label)
        try:
            Path(args.output).write_text(html, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write {args.output!r}: {exc.strerror or exc}") from None
        print(f"dashboard written to {Path(args.output).resolve()}")
        return 0
    return _serve(args, engine, pricer, url, label, since, until)


def _serve(args, engine, pricer, url, label, since, until) -> int:
    from llmtap.analytics.reprice import reprice
    from llmtap.dashboards import data, page
    from llmtap.dashboards.serve import make_server

    def collect():
        reprice(engine, pricer)  # price what arrived since the last poll
        return data.collect(url, since, until)

    try:
        server = make_server(args.host, args.port, collect, lambda d: page.render(d, store=label, live=True))
    except OSError as exc:
        raise UsageError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
    print(f"dashboard on http://{args.host}:{server.server_address[1]}/ (Ctrl-C stops)", file=sys.stderr)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
