"""OpenTelemetry spans over OTLP/HTTP (`--otlp-endpoint URL`, `[otlp]`): the settings, and
the writer's observer that sends one span per exchange the store took.

    [otlp]
    endpoint = "http://127.0.0.1:4318/v1/traces"   # a bare host:port gets /v1/traces
    headers = { authorization = "Bearer …" }         # sent with each export, never logged
    compression = "gzip"                             # or "none"
    max_queue = 20000                                # spans held while the endpoint is away
    hold_seconds = 300                               # how long one batch is retried
    timeout_seconds = 10                             # one request
    service_name = "llmtap"

The observer runs in the writer's process: after each commit it hands the rows to a thread
of its own, which works out each exchange's conversation and cache verdict
(otlp_lines.py), makes its span's parts (otlp_spans.py) and gives them to the SDK's batch
processor (otlp_export.py); nothing the writer does waits on it or on the endpoint.

Not responsible for the backfill (`llmtap export --format otlp`, cli/export.py, which
shares the same parts), nor for what the spans say or how they travel.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from llmtap.storage.rows import RowSet
from llmtap.telemetry.otlp_export import ExportOptions, Sender
from llmtap.telemetry.otlp_lines import Lines
from llmtap.telemetry.otlp_spans import from_table_row, span_parts, trace_key

if TYPE_CHECKING:
    from llmtap.storage.writer import Observer
    from llmtap.telemetry.settings import Telemetry

log = logging.getLogger("llmtap.telemetry")
CLOSE_TIMEOUT_S = 10.0  # at shutdown, what is queued gets this long to go out
# [otlp] key -> ExportOptions field, and the type a value must have
_KEYS: dict[str, tuple[str, type | tuple[type, ...]]] = {
    "endpoint": ("endpoint", str),
    "headers": ("headers", dict),
    "compression": ("compression", str),
    "max_queue": ("max_queue", int),
    "batch_size": ("batch_size", int),
    "hold_seconds": ("hold_s", (int, float)),
    "timeout_seconds": ("timeout_s", (int, float)),
    "service_name": ("service_name", str),
}


@dataclass(frozen=True)
class OtlpSettings:
    endpoint: str
    options: ExportOptions


def settings_from(flag: str | None, section: Any) -> OtlpSettings | None:
    """Raises ValueError with a one-line message (a header's value is never in it)."""
    if flag is None and section is None:
        return None
    if section is not None and not isinstance(section, dict):
        raise ValueError("[otlp] must be a table")
    given = dict(section or {})
    if flag is not None:
        given["endpoint"] = flag
    values: dict[str, Any] = {}
    for key, value in given.items():
        if key not in _KEYS:
            raise ValueError(f"[otlp] has no setting {key!r} (one of {', '.join(_KEYS)})")
        field, kind = _KEYS[key]
        if not isinstance(value, kind) or isinstance(value, bool):
            raise ValueError(f"[otlp] {key} has the wrong type")
        values[field] = value
    if "endpoint" not in values:
        raise ValueError("[otlp] needs endpoint = URL (or give --otlp-endpoint URL)")
    values["endpoint"] = endpoint_url(values["endpoint"])
    values["headers"] = headers_from(values.get("headers", {}))
    return OtlpSettings(values["endpoint"], _checked(ExportOptions(**values)))


def endpoint_url(text: str) -> str:
    """An OTLP/HTTP traces URL; one without a path gets the signal's default, /v1/traces."""
    try:
        parts = urlsplit(text.strip())
        parts.port  # noqa: B018 - a bad port raises here
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        shown = text if "@" not in text else "a URL with credentials"  # a password is never printed
        raise ValueError(f"--otlp-endpoint wants an http:// or https:// URL, not {shown!r}")
    path = parts.path if parts.path not in ("", "/") else "/v1/traces"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def headers_from(given: Any) -> tuple[tuple[str, str], ...]:
    if isinstance(given, dict):
        pairs = list(given.items())
    else:  # K=V texts, as `llmtap export --header` takes them
        pairs = []
        for text in given:
            name, sep, value = str(text).partition("=")
            if not sep or not name.strip():
                raise ValueError("--header wants NAME=VALUE (a value is never printed)")
            pairs.append((name, value))
    out = []
    for name, value in pairs:
        if not isinstance(value, str) or not str(name).strip():
            raise ValueError(f"[otlp] header {str(name)!r} needs a text value")
        out.append((str(name).strip().lower(), value))
    return tuple(out)


def _checked(options: ExportOptions) -> ExportOptions:
    if options.compression not in ("gzip", "none"):
        raise ValueError("[otlp] compression is gzip or none")
    for name in ("max_queue", "batch_size", "hold_s", "timeout_s"):
        if getattr(options, name) <= 0:
            key = next(k for k, (f, _) in _KEYS.items() if f == name)
            raise ValueError(f"[otlp] {key} must be above 0")
    return options


class SpanObserver:
    """storage.writer.Observer: one span per exchange each commit added. `observe` only
    hands the rows to a thread of its own (at most `max_queue` rows wait there; more are
    dropped and counted), which works out each span and gives it to the SDK: the writer's
    thread never spends the mapping's or the SDK's time."""

    def __init__(self, options: ExportOptions) -> None:
        self.sender = Sender(options)
        self.lines = Lines()
        self.skipped = 0  # rows dropped at the hand-over: the thread could not keep up
        self._limit = options.max_queue
        self._waiting = 0
        self._count = threading.Lock()
        self._batches: queue.SimpleQueue[RowSet | None] = queue.SimpleQueue()
        self._failed = False
        self._thread = threading.Thread(target=self._run, name="llmtap-otlp", daemon=True)
        self._thread.start()

    def observe(self, rows: RowSet) -> None:
        with self._count:
            if self._waiting + len(rows.exchanges) > self._limit:
                self.skipped += len(rows.exchanges)
                return
            self._waiting += len(rows.exchanges)
        self._batches.put(rows)

    def close(self) -> None:
        self._batches.put(None)
        self._thread.join(CLOSE_TIMEOUT_S)
        stats = self.sender.close(CLOSE_TIMEOUT_S)
        dropped = stats.dropped + self.skipped
        log.log(
            logging.WARNING if dropped or stats.given_up else logging.INFO,
            "llmtap otlp: %d spans sent to %s, %d not (%d dropped while it was away, %d unsent at the end)",
            stats.sent,
            self.sender.options.shown,
            dropped + stats.given_up,
            dropped,
            stats.given_up,
        )

    def _run(self) -> None:
        while (rows := self._batches.get()) is not None:
            try:
                self._spans(rows)
            finally:
                with self._count:
                    self._waiting -= len(rows.exchanges)

    def _spans(self, rows: RowSet) -> None:
        calls: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for call in rows.tool_calls:
            calls[call["exchange_id"]].append(call)
        for row in sorted(rows.exchanges, key=lambda r: (r["started_at"], r["id"])):
            try:
                conversation = self.lines.conversation(row)
                cache = self.lines.cache(row)
                exported = from_table_row(row, calls.get(row["id"], []))
                exported["conversation_id"] = conversation
                self.sender.send(span_parts(exported, trace_key(row["thread_key"], conversation, row["id"]), cache))
            except Exception:  # noqa: BLE001 - one exchange's span never stops the others
                if not self._failed:  # once: a bug here would otherwise log per exchange
                    log.exception("llmtap otlp: an exchange could not become a span (the first such; no more logged)")
                self._failed = True


def observer(telemetry: Telemetry) -> Observer:
    assert telemetry.otlp is not None
    return SpanObserver(telemetry.otlp.options)
