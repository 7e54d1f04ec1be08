"""The last `llmtap reconcile` results (cli/reconcile.py keeps one per provider in llmtap's
home as `reconcile-PROVIDER.json`, 0600) read back for a dashboard of the same store.

A result names its store by `store_identity`: a digest of the backend, host, port and
database (for SQLite the resolved file path), never of the user or password, so it can sit
in a file and a page; a dashboard shows only the results whose identity is its store's.

Reading is bounded and never raises for what is in the files: a file over `MAX_BYTES` is
refused before it is read, one with more than `MAX_ROWS` rows too, and a file that is not
JSON, has the wrong shape (a number where text goes, an unknown cause, no totals row), was
made for another provider or another store (or before results named their store) is one
line in `notes`, and no result.

Not responsible for making the results (analytics/reconcile.py matches, cli/reconcile.py
fetches and writes), for showing them (dashboards/_reconcile.html), nor for who may read
the home folder (storage/private.py keeps it 0700 and the files 0600).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url

from llmtap.analytics.reconcile import CAUSES
from llmtap.analytics.reconcile_sources import TOKEN_CLASSES

PROVIDERS = ("anthropic", "openai")
SCOPES = {"anthropic": "workspace", "openai": "project"}
MAX_BYTES = 4 << 20  # a year of days × models × keys is far less
MAX_ROWS = 5000
TOKEN_COLUMNS = tuple(f"{side}_{name}" for name in TOKEN_CLASSES for side in ("provider", "llmtap"))
MONEY_COLUMNS = ("provider_cost_usd", "llmtap_cost_usd", "gap_usd")


def store_identity(url: str) -> str:
    """A store's name that is no secret: the first 16 hex digits of the SHA-256 of its
    backend, host, port and database (SQLite: the file's resolved absolute path)."""
    parsed = make_url(url)
    database = parsed.database or ""
    backend = parsed.get_backend_name()
    if backend == "sqlite" and database and database != ":memory:" and not database.startswith("file:"):
        database = str(Path(database).expanduser().resolve())
    parts = (backend, (parsed.host or "").lower(), str(parsed.port or ""), database)
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Saved:
    """One provider's last result: the UTC days [since, until), when it was made, the
    scope's name (`workspace` or `project`), its rows and its totals row."""

    provider: str
    since: date
    until: date
    made_at: datetime
    scope: str
    rows: list[dict[str, Any]]
    total: dict[str, Any]

    def shown(self) -> dict[str, Any]:
        """As the dashboard's data carries it: money as decimal text, days as ISO text."""

        def plain(row: dict[str, Any]) -> dict[str, Any]:
            return {k: format(v, "f") if isinstance(v, Decimal) else v for k, v in row.items()}

        return {
            "provider": self.provider,
            "since": self.since.isoformat(),
            "last_day": date.fromordinal(self.until.toordinal() - 1).isoformat(),
            "until": self.until.isoformat(),
            "made_at": self.made_at.isoformat(sep=" "),
            "scope": self.scope,
            "rows": [plain(row) for row in self.rows],
            "total": plain(self.total),
        }


@dataclass
class Loaded:
    saved: list[Saved] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class _Bad(Exception):
    """Why a file is not shown (one line)."""


def load_saved(home: Path, store: str) -> Loaded:
    """The results in `home` made for `store` (a `store_identity`), by provider, and a
    note for each file there that is not shown."""
    loaded = Loaded()
    for provider in PROVIDERS:
        path = Path(home) / f"reconcile-{provider}.json"
        try:
            document = _read(path)
            if document is None:
                continue
            loaded.saved.append(_parse(document, provider, store))
        except _Bad as why:
            loaded.notes.append(f"{path.name}: {why}; not shown")
    return loaded


def _read(path: Path) -> Any:
    """The JSON in `path`, None when there is no such file."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _Bad(f"unreadable ({exc.strerror or type(exc).__name__})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _Bad("not a regular file")
        if info.st_size > MAX_BYTES:
            raise _Bad(f"larger than {MAX_BYTES >> 20} MiB")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            raw = handle.read(MAX_BYTES + 1)
    except OSError as exc:
        raise _Bad(f"unreadable ({exc.strerror or type(exc).__name__})") from None
    finally:
        os.close(fd)
    if len(raw) > MAX_BYTES:
        raise _Bad(f"larger than {MAX_BYTES >> 20} MiB")
    try:
        return json.loads(raw.decode("utf-8"), parse_float=Decimal, parse_constant=_no_constant)
    except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise _Bad("not JSON") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number")


def _parse(document: Any, provider: str, store: str) -> Saved:
    if not isinstance(document, dict):
        raise _Bad("not a reconcile result")
    if document.get("provider") != provider:
        raise _Bad("made for another provider")
    made_for = document.get("store")
    if made_for is None:
        raise _Bad("made before results named their store (run `llmtap reconcile` again)")
    if made_for != store:
        raise _Bad("made for another store")
    since, until = _day(document.get("since")), _day(document.get("until"))
    if since is None or until is None or until <= since:
        raise _Bad("its days are malformed")
    made_at = _moment(document.get("made_at"))
    if made_at is None:
        raise _Bad("its time is malformed")
    rows = document.get("rows")
    if not isinstance(rows, list) or not rows:
        raise _Bad("it has no rows")
    if len(rows) > MAX_ROWS:
        raise _Bad(f"more than {MAX_ROWS:,} rows")
    scope = SCOPES[provider]
    checked = [_row(row, scope, n) for n, row in enumerate(rows, 1)]
    *body, total = checked
    if total["day"] != "total" or any(row["day"] == "total" for row in body):
        raise _Bad("its totals row is missing")
    for row in body:
        if _day(row["day"]) is None:
            raise _Bad("a row's day is malformed")
    return Saved(provider, since, until, made_at, scope, body, total)


def _row(row: Any, scope: str, n: int) -> dict[str, Any]:
    """A row with exactly the columns shown, each of its type."""
    if not isinstance(row, dict):
        raise _Bad(f"row {n} is not an object")
    out: dict[str, Any] = {}
    day = row.get("day")
    if not isinstance(day, str):
        raise _Bad(f"row {n}: day is not text")
    out["day"] = day
    for column in ("model", scope, "key"):
        value = row.get(column)
        if value is not None and not isinstance(value, str):
            raise _Bad(f"row {n}: {column} is not text")
        out[column] = value
    for column in TOKEN_COLUMNS:
        value = row.get(column)
        if not isinstance(value, int) or isinstance(value, bool):
            raise _Bad(f"row {n}: {column} is not a whole number")
        out[column] = value
    for column in MONEY_COLUMNS:
        value = row.get(column)
        if isinstance(value, bool) or not isinstance(value, (int, Decimal)) or not Decimal(value).is_finite():
            raise _Bad(f"row {n}: {column} is not a number")
        out[column] = Decimal(value)
    causes = row.get("causes")
    if not isinstance(causes, list) or not all(isinstance(c, str) and c in CAUSES for c in causes):
        raise _Bad(f"row {n}: causes are not a list of known causes")
    out["causes"] = list(causes)
    return out


def _day(value: Any) -> date | None:
    if not isinstance(value, str) or len(value) != 10:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        return None


def _moment(value: Any) -> datetime | None:
    if not isinstance(value, str) or len(value) > 40:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None
