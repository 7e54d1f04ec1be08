"""`llmtap reconcile --provider anthropic|openai --since D --until D` (SPEC §3): the
provider's own usage and cost reports beside what llmtap recorded and priced, per UTC day
× model × key (with its workspace or project), the gap and its likely causes
(analytics/reconcile.py says the rules).

The admin key comes from `ANTHROPIC_ADMIN_KEY` / `OPENAI_ADMIN_KEY` only: never an
option (it would show in `ps` and shell history), never stored, logged or printed, and
scrubbed from every error. `--since` and `--until` are UTC days, `--until` exclusive (as
the providers' daily buckets are UTC days, there is no `--tz`). The last result, without
the key, is kept in llmtap's home as `reconcile-PROVIDER.json` (0600) for a dashboard of
the same store (its `store` names it without a secret: analytics/reconcile_saved.py).

Not responsible for the HTTP (analytics/reconcile_sources.py) or the matching.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from llmtap.cli import output
from llmtap.cli import settings as settings_module
from llmtap.cli.errors import UsageError
from llmtap.cli.timeargs import moment

KEY_ENV = {"anthropic": "ANTHROPIC_ADMIN_KEY", "openai": "OPENAI_ADMIN_KEY"}
MAX_DAYS = 366
RECORDED_BY = ["day", "model", "key", "provider"]


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "reconcile",
        help="compare the provider's own usage and cost reports with what llmtap recorded",
        description="The provider's usage and cost reports (admin key from ANTHROPIC_ADMIN_KEY or "
        "OPENAI_ADMIN_KEY) beside llmtap's recorded tokens and cost, per UTC day × model × key, "
        "with the gap and its likely causes.",
    )
    parser.add_argument("--provider", required=True, choices=tuple(KEY_ENV), help="whose reports to read")
    parser.add_argument("--since", required=True, help="first UTC day (ISO date, or an age such as 7d)")
    parser.add_argument("--until", required=True, help="UTC day to stop before (exclusive)")
    parser.add_argument("--api-base", metavar="URL", help="the provider's API base URL (a gateway or a test server)")
    output.add_format(parser)
    settings_module.add_common(parser)
    parser.set_defaults(run=run, lake=None, prices=None)


def _days(args: argparse.Namespace) -> tuple[date, date]:
    since, until = moment(args.since), moment(args.until)
    assert since is not None and until is not None  # both are required
    first = since.astimezone(UTC).date()
    end = until.astimezone(UTC)
    last = end.date() if end.timetz().replace(tzinfo=None) == time() else end.date() + timedelta(days=1)
    if last <= first:
        raise UsageError("--until must be a later day than --since")
    if (last - first).days > MAX_DAYS:
        raise UsageError(f"reconcile covers at most {MAX_DAYS} days at a time")
    return first, last


def run(args: argparse.Namespace) -> int:
    name = KEY_ENV[args.provider]
    admin_key = os.environ.get(name, "").strip()
    if not admin_key:
        raise UsageError(f"{name} is not set: reconcile reads the provider's reports with an admin key from it")
    first, last = _days(args)
    store, recorded = _recorded(args, first, last)
    fetched = _fetch(args.provider, args.api_base, admin_key, first, last)
    from llmtap.analytics.reconcile import reconcile

    columns, rows = reconcile(fetched, recorded)
    _keep(args.provider, store, first, last, rows)
    _show(args, columns, rows, first, last)
    return 0


def _recorded(args: argparse.Namespace, first: date, last: date) -> tuple[str, list[dict[str, Any]]]:
    """The store's identity (analytics/reconcile_saved.py) and llmtap's `report cost` rows
    by day, model and key of the provider, priced first."""
    from llmtap.analytics import reports
    from llmtap.analytics.reconcile_saved import store_identity
    from llmtap.cli import pricing
    from llmtap.cli.report import opened

    since = datetime.combine(first, time(), UTC)
    until = datetime.combine(last, time(), UTC)
    with opened(args) as store:
        with reports.window(store.duck, "cost", since, until):
            pricing.catch_up(store.engine, store.pricer, store.duck)
        table = reports.run(store.url, "cost", by=RECORDED_BY, since=since, until=until, connection=store.duck)
        identity = store_identity(store.url)
    return identity, [row for row in table.rows if row.get("provider") == args.provider]


def _fetch(provider: str, base: str | None, admin_key: str, first: date, last: date) -> Any:
    from llmtap.analytics import reconcile_sources as sources

    fetch = sources.fetch_anthropic if provider == "anthropic" else sources.fetch_openai
    try:
        return fetch(base, admin_key, first, last, sources.Limits())
    except sources.SourceError as exc:
        raise UsageError(f"{provider} reports: {_scrubbed(str(exc), admin_key)}") from None
    except Exception as exc:  # noqa: BLE001 - whatever a hostile server provokes: one line, no key
        raise UsageError(f"{provider} reports: unreadable ({_scrubbed(type(exc).__name__, admin_key)})") from None


def _scrubbed(text: str, secret: str) -> str:
    return " ".join(text.replace(secret, "[admin key]").split())


def _plain(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows whose causes are one text cell (a table, CSV)."""
    return [{**row, "causes": ", ".join(row["causes"])} for row in rows]


def _show(args: argparse.Namespace, columns: list[str], rows: list[dict[str, Any]], first: date, last: date) -> None:
    from llmtap.analytics import render
    from llmtap.analytics.reports import Table

    if args.format in ("json", "jsonl"):
        output.write(Table(columns, rows), args.format, UTC)
        return
    if args.format == "csv":
        output.write(Table(columns, _plain(rows)), "csv", UTC)
        return
    shown = Table(columns, _plain(rows[:-1]), dimensions=columns[:4])
    title = f"llmtap reconcile {args.provider}: UTC days {first} to {last - timedelta(days=1)}"
    if not shown.rows:
        print(f"{title}: neither the provider nor llmtap has usage in those days")
        return
    optional = tuple(
        f"{side}_{n}" for n in ("cache_write_tokens", "cache_read_tokens") for side in ("llmtap", "provider")
    )
    render.as_rich(shown, title, render.make_console(), zone=UTC, optional=(*optional, "key"))
    causes = rows[-1]["causes"]
    print(f"causes: {', '.join(causes) if causes else 'none: the reports agree'}", file=sys.stdout)


def _keep(provider: str, store: str, first: date, last: date, rows: list[dict[str, Any]]) -> None:
    """The last result in llmtap's home (0600), for a dashboard of the same store (`store`:
    its identity, no secret in it); a folder that cannot be written is not worth failing
    the command for."""
    from llmtap.analytics.render import as_json
    from llmtap.analytics.reports import Table
    from llmtap.storage.engine import home
    from llmtap.storage.private import open_private, private_dir

    columns = list(rows[-1]) if rows else []
    about = {"provider": provider, "store": store, "since": first.isoformat(), "until": last.isoformat()}
    about["made_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    document = json.dumps(about)[:-1] + ', "rows": ' + as_json(Table(columns, rows)) + "}\n"
    try:
        folder = private_dir(home())
        with open_private(folder / f"reconcile-{provider}.json", "w") as out:
            out.write(document)
    except OSError:
        pass
