"""Budget alerts: each threshold of each limit fires once per period, remembered in the
store, and goes out as one log line and, with `[budgets].webhook`, a JSON POST: by
default llmtap's own object per alert (`payload`); with `webhook_format = "slack"` one
message per check for all the alerts it fired (`slack_payload`).

Once per period, across restarts and across proxies sharing a store: firing a threshold
is an INSERT of its own key into `store_settings` (primary key `key`); the proxy whose
insert succeeds sends the alert, any other insert fails and sends nothing. The key is a
digest of (scope, name, period, period start, threshold); the value says them in clear.
Old periods' keys stay (a few per limit and period) and are what `report budgets` reads.

The webhook is POSTed from a thread of its own, with up to ATTEMPTS tries and a doubling
pause between them; a 2xx ends it, a 4xx other than 408/429 gives up at once. It never
runs on the writer's thread, let alone the proxy's event loop.

A Slack message is an incoming-webhook payload, `{"text": …, "blocks": [section blocks of
mrkdwn]}`; `text` is the whole message too, which is what a Microsoft Teams incoming
webhook (the legacy connector) shows and what a Teams Workflow can post. Names are data:
a team name is cleaned as a stored one is (printable, key shapes scrubbed:
storage/teams.py), cut, and escaped for mrkdwn (`&`, `<`, `>`:
https://docs.slack.dev/messaging/formatting-message-text), and the text objects are
`verbatim` (no automatic parsing of links, channels or mentions:
https://docs.slack.dev/reference/block-kit/composition-objects/text-object), so
`<!channel>` or `@here` in a name pings no one. A message shows at most SLACK_LINES
alerts (then how many more) and its JSON stays under SLACK_MAX_BYTES, whatever the names.

Not responsible for counting spend (budget_spend.py) or deciding when to check
(budgets.py).
"""

from __future__ import annotations

import hashlib
import json
import logging
import queue
import threading
import urllib.error
import urllib.request
from collections.abc import Sequence
from datetime import UTC, datetime, tzinfo
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import Engine, insert, select
from sqlalchemy.exc import IntegrityError

from llmtap.storage.schema import store_settings
from llmtap.storage.teams import clean_team
from llmtap.telemetry.budget_config import Limit
from llmtap.telemetry.budget_spend import Standing

log = logging.getLogger("llmtap.budgets")

KEY_PREFIX = "budget_alert:"
ATTEMPTS = 5
FIRST_PAUSE = 0.5  # seconds; doubles after each failed try
TIMEOUT = 5.0  # seconds per try
_MICRO = Decimal("0.000001")
SLACK_LINES = 10  # alerts one Slack message shows; the rest are counted
SLACK_NAME = 64  # characters of a name a Slack message shows
SLACK_MAX_BYTES = 16_384  # a Slack message's JSON at most (Slack: 3000 characters a section, 50 blocks)


def key(limit: Limit, start: datetime, threshold: int) -> str:
    """The store_settings key of one threshold in one period (under its 64 characters)."""
    text = f"{limit.scope}\0{limit.name}\0{limit.period}\0{start.isoformat()}\0{threshold}"
    return KEY_PREFIX + hashlib.sha256(text.encode()).hexdigest()[:48]


def fired(engine: Engine, limit: Limit, start: datetime) -> set[int]:
    """The thresholds already fired for `limit` in the period that starts at `start`."""
    keys = {key(limit, start, t): t for t in limit.thresholds}
    with engine.connect() as connection:
        found = connection.execute(select(store_settings.c.key).where(store_settings.c.key.in_(keys))).scalars()
        return {keys[k] for k in found}


def claim(engine: Engine, standing: Standing, threshold: int, now: datetime) -> bool:
    """Take the right to send this alert; False when it was fired already (here or by
    another proxy on the same store)."""
    value = {
        "scope": standing.limit.scope,
        "name": standing.limit.name,
        "period": standing.limit.period,
        "period_start": standing.start.isoformat(),
        "threshold": threshold,
        "spent_usd": str(standing.spent_usd),
    }
    try:
        with engine.begin() as connection:
            connection.execute(
                insert(store_settings).values(
                    key=key(standing.limit, standing.start, threshold), value=value, updated_at=now
                )
            )
    except IntegrityError:
        return False
    return True


def payload(standing: Standing, threshold: int, now: datetime, zone: tzinfo = UTC) -> dict[str, Any]:
    """llmtap's own alert object; the period's bounds with the offset of `zone` (the
    periods' calendar, `[budgets] tz`), named in `tz`."""
    limit = standing.limit
    return {
        "source": "llmtap",
        "kind": "budget_threshold",
        "scope": limit.scope,
        "name": limit.name,
        "period": limit.period,
        "period_start": standing.start.astimezone(zone).isoformat(),
        "period_end": standing.end.astimezone(zone).isoformat(),
        "tz": _zone_name(zone),
        "threshold_percent": threshold,
        "limit_usd": str(limit.usd),
        "spent_usd": str(standing.spent_usd.quantize(_MICRO)),
        "percent": float(round(standing.ratio * 100, 2)),
        "over": standing.over,
        "at": now.astimezone(UTC).isoformat(),
    }


def line(standing: Standing, threshold: int, zone: tzinfo = UTC) -> str:
    limit = standing.limit
    return (
        f"llmtap budgets: {limit.label} reached {threshold}% of its {limit.period} limit "
        f"(${standing.spent_usd:.2f} of ${limit.usd:.2f}, "
        f"period from {standing.start.astimezone(zone):%Y-%m-%d} {_zone_name(zone)})"
    )


def bodies(alerts: Sequence[tuple[Standing, int]], now: datetime, zone: tzinfo, form: str) -> list[dict[str, Any]]:
    """What the webhook POSTs for the alerts one check fired: an object each, or one
    Slack message for them all."""
    if not alerts:
        return []
    if form == "slack":
        return [slack_payload(alerts, zone)]
    return [payload(standing, threshold, now, zone) for standing, threshold in alerts]


def mrkdwn(text: str) -> str:
    """Text as Slack mrkdwn shows it literally: its three control characters escaped."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def shown_name(name: str) -> str:
    """A limit's name as a message shows it: cleaned like a stored team name (no control
    characters, no key shapes), at most SLACK_NAME characters, escaped for mrkdwn."""
    cleaned = clean_team(name) or "?"
    if len(cleaned) > SLACK_NAME:
        cleaned = cleaned[: SLACK_NAME - 1] + "…"
    return mrkdwn(cleaned)


def slack_line(standing: Standing, threshold: int, zone: tzinfo = UTC) -> str:
    limit = standing.limit
    mark = ":rotating_light:" if standing.over else ":warning:"
    return (
        f"{mark} *{limit.scope} {shown_name(limit.name)}* reached *{threshold}%* of its {limit.period} limit: "
        f"${standing.spent_usd:,.2f} of ${limit.usd:,.2f} "
        f"(period from {standing.start.astimezone(zone):%Y-%m-%d} {_zone_name(zone)})"
    )


def slack_payload(alerts: Sequence[tuple[Standing, int]], zone: tzinfo = UTC) -> dict[str, Any]:
    """One Slack incoming-webhook message for `alerts` (at least one): a section block a
    line, `text` the same lines; at most SLACK_LINES of them and SLACK_MAX_BYTES of JSON."""
    lines = [slack_line(standing, threshold, zone) for standing, threshold in alerts[:SLACK_LINES]]
    while True:
        rest = len(alerts) - len(lines)
        shown = [*lines, f"…and {rest} more: `llmtap report budgets`"] if rest else lines
        message = {
            "text": "\n".join(shown),
            "blocks": [{"type": "section", "text": _mrkdwn_text(text)} for text in shown],
        }
        if len(json.dumps(message).encode()) <= SLACK_MAX_BYTES or len(lines) == 1:
            return message
        lines.pop()


def _mrkdwn_text(text: str) -> dict[str, Any]:
    # verbatim: no automatic parsing of plain text (links, channel names, mentions)
    return {"type": "mrkdwn", "text": text, "verbatim": True}


def _zone_name(zone: tzinfo) -> str:
    return str(getattr(zone, "key", None) or zone.tzname(None) or "UTC")


class Webhook:
    """POSTs alerts to one URL from a daemon thread; `close` waits a bounded time."""

    def __init__(self, url: str, attempts: int = ATTEMPTS, first_pause: float = FIRST_PAUSE) -> None:
        self.url = url
        parts = urlsplit(url)  # a webhook's path or query may be its secret (Slack's are): never logged
        self.shown = f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")
        self.attempts = attempts
        self.first_pause = first_pause
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="llmtap-budget-webhook", daemon=True)
        self._thread.start()

    def send(self, alert: dict[str, Any]) -> None:
        self._queue.put(alert)

    def close(self, timeout: float = 10.0) -> None:
        self._queue.put(None)
        self._thread.join(timeout)
        self._stopping.set()  # whatever is still retrying stops at its next pause

    def _run(self) -> None:
        while True:
            alert = self._queue.get()
            if alert is None:
                return
            self._deliver(alert)

    def _deliver(self, alert: dict[str, Any]) -> None:
        body = json.dumps(alert).encode()
        pause = self.first_pause
        for attempt in range(1, self.attempts + 1):
            outcome = self._post(body)
            if outcome is None:
                return
            if outcome.startswith("gave up") or attempt == self.attempts:
                log.warning("llmtap budgets: webhook %s not delivered (%s)", self.shown, outcome)
                return
            if self._stopping.wait(pause):
                log.warning("llmtap budgets: webhook %s not delivered (shutting down)", self.shown)
                return
            pause *= 2

    def _post(self, body: bytes) -> str | None:
        """None when delivered; else why not ("gave up: …" when a retry cannot help)."""
        request = urllib.request.Request(
            self.url, data=body, method="POST", headers={"content-type": "application/json", "user-agent": "llmtap"}
        )
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT) as response:  # noqa: S310 - the operator's URL
                response.read()
            return None
        except urllib.error.HTTPError as exc:
            if 400 <= exc.code < 500 and exc.code not in (408, 429):
                return f"gave up: HTTP {exc.code}"
            return f"HTTP {exc.code}"
        except (OSError, ValueError) as exc:
            return type(exc).__name__
