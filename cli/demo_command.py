"""`llmtap demo`: record a minute of three teams' traffic from the official SDKs through the
real proxy into a fresh SQLite file, with no network and no keys; then print the usage,
cost and cache reports and write the dashboard, and say where everything is."""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from llmtap.cli.errors import UsageError


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "demo",
        help="the whole job offline: simulated providers, the real proxy, SDK traffic, reports, dashboard",
        description="The main job with no network and no keys: recorded traffic from real SDK clients is played "
        "through the real proxy against simulated providers into a fresh SQLite store; then the reports are "
        "printed and the dashboard written.",
    )
    parser.add_argument(
        "--dir", metavar="FOLDER", help="where to put the store and the dashboard (default: a new temp folder)"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    try:
        import anthropic  # noqa: F401
        import google.genai  # noqa: F401
        import openai  # noqa: F401
    except ImportError as exc:
        raise UsageError(
            f"the demo drives the official SDKs: install them (uv sync, or pip install "
            f"'llmtap[demo]'); missing {exc.name}"
        ) from None
    from rich.console import Console

    from llmtap.analytics import render, reports
    from llmtap.analytics.duck import connect
    from llmtap.analytics.pricing import Pricer
    from llmtap.analytics.reprice import reprice
    from llmtap.cli.demo.run import run as run_demo
    from llmtap.dashboards import data, page
    from llmtap.storage.engine import make_engine
    from llmtap.storage.private import open_private

    console = Console() if Console().is_terminal else Console(width=120)
    folder = Path(args.dir).expanduser().resolve() if args.dir else Path(tempfile.mkdtemp(prefix="llmtap-demo-"))
    started = time.monotonic()
    console.print(f"[bold]llmtap demo[/] — recording into {folder}")
    db_url, problems = run_demo(folder, console)
    engine = make_engine(db_url)
    reprice(engine, Pricer())
    engine.dispose()
    duck = connect(db_url)  # one DuckDB connection for every report the demo prints
    try:
        for kind, by in (("usage", ["team"]), ("cost", ["team", "model"]), ("cache", ["team"])):
            table = reports.run(db_url, kind, by=by, connection=duck)
            title = f"llmtap report {kind} --by {','.join(by)}"
            render.as_rich(table, title, console, table.compact(reports.REPORTS[kind].table))
            if kind == "cost":  # which prices, and what is not in the total, as `report cost` says
                for line in render.price_footer_lines(reports.price_footer(db_url, connection=duck)):
                    console.print(render.shown(line))
        misses = reports.run(db_url, "cache", listing=True, connection=duck).rows
        problems_found = reports.run(db_url, "tools", listing=True, connection=duck).rows
    finally:
        duck.close()
    dashboard = folder / "llmtap-dashboard.html"
    with open_private(dashboard, "w", encoding="utf-8") as handle:
        handle.write(page.render(data.collect(db_url), store=db_url))
    console.print(
        f"cache misses: {len(misses)} ({', '.join(sorted({m['cause'] for m in misses})) or 'none'}); "
        f"tool-call problems: {len(problems_found)}"
    )
    console.print(f"store:     {folder / 'llmtap.db'}   (llmtap report usage --db {db_url})")
    console.print(f"dashboard: {dashboard}")
    console.print(f"proxy log: {folder / 'proxy.log'}")
    console.print(f"done in {time.monotonic() - started:.1f} s; nothing is left running.")
    for problem in problems:
        console.print(f"[red]problem:[/] {problem}")
    return 1 if problems else 0
