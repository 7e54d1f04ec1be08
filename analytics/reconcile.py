"""`llmtap reconcile`'s matching: the provider's own usage and cost (analytics/
reconcile_sources.py) beside what llmtap recorded and priced (`report cost` by day × model
× key, analytics/reports.py), per UTC day × model × key, with the workspace (Anthropic) or
project (OpenAI) the provider's key listing puts the key in, the gap and its likely causes.

Matching. A provider key is llmtap's key when the end of its partial hint (Anthropic's
`partial_key_hint`, OpenAI's `redacted_value`: the characters after "...", at most four) is
the end of the key's last four characters llmtap keeps; when two provider keys show the
same end, the first by id takes llmtap's rows. A key llmtap saw that the provider does not
list is its own row (`…ABCD`, no workspace). Usage the provider metered without a key
(Anthropic's Workbench) is a row with no key. OpenAI's costs name their key; Anthropic's
cost report does not, so each of its token costs (one per workspace × model × service tier
× context window × token type) is shared out over the keys in proportion to their tokens
of that type (exact: one price per token there; the last key takes the rounding, so the
shares sum to the line). A cost without any such tokens stays on a row with no key.
Non-token costs are one `(fees)` row a day (beside llmtap's server-tool fees, which leave
the model rows), credits one `(credits)` row a day.

Causes, each row (a money difference is one when it is at least half a cent):
- `not_recorded`: the provider metered or billed it and llmtap has no exchange there (a
  key or workspace the proxy never saw, Workbench usage).
- `unpriced`: some of llmtap's exchanges there are unpriced or without usage.
- `tokens_differ`: llmtap has exchanges there and a token class differs.
- `price_differs`: every token class agrees, the costs do not (and nothing is unpriced).
- `batch`: the row has the provider's batch usage or cost, and a difference of any kind
  (batch results never pass the proxy as priced exchanges, and cost half).
- `fees`: a `(fees)` row with a difference (web search, code execution, other line items).
- `credits`: a `(credits)` row with a difference.
The totals row (`day` "total") sums every column and lists every cause of the rows.

Not responsible for fetching (reconcile_sources) or for the output formats (the CLI).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from typing import Any

from llmtap.analytics.reconcile_sources import ANTHROPIC_TOKEN_TYPES, TOKEN_CLASSES, CostRow, Fetched, UsageRow

CAUSES = ("not_recorded", "unpriced", "price_differs", "tokens_differ", "fees", "batch", "credits")
FEES, CREDITS = "(fees)", "(credits)"
CENT_HALF = Decimal("0.005")
PICO = Decimal("1e-12")
Where = tuple[str, str | None, str | None, str | None]  # day, model, scope, key id


@dataclass
class Side:
    tokens: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TOKEN_CLASSES, 0))
    cost: Decimal = Decimal(0)
    requests: int = 0
    unpriced: int = 0
    batch: bool = False
    seen: bool = False  # the provider metered or billed something here


@dataclass
class Line:
    provider: Side = field(default_factory=Side)
    llmtap: Side = field(default_factory=Side)


def reconcile(fetched: Fetched, recorded: list[dict[str, Any]]) -> tuple[list[str], list[dict[str, Any]]]:
    """The columns and rows (the totals row last) for the provider's rows and llmtap's
    `report cost` rows by day, model, key (its provider's only)."""
    lines: dict[Where, Line] = defaultdict(Line)
    for usage in fetched.usage:
        _add_usage(lines[_where(usage.day, usage.model, usage.scope, usage.key_id)].provider, usage)
    _add_costs(fetched, lines)
    by_tail = _tails(fetched)
    for row in recorded:
        _add_recorded(lines, row, by_tail, fetched)
    scope = "workspace" if fetched.provider == "anthropic" else "project"
    columns = ["day", "model", scope, "key"]
    for metric in (*TOKEN_CLASSES, "cost_usd"):
        columns += [f"provider_{metric}", f"llmtap_{metric}"]
    columns += ["gap_usd", "causes"]
    rows = [_row(where, line, scope, fetched) for where, line in sorted(lines.items(), key=_order)]
    return columns, [*rows, _totals(rows, columns)]


def _where(day: date | str, model: str | None, scope: str | None, key_id: str | None) -> Where:
    return (day if isinstance(day, str) else day.isoformat(), model, scope, key_id)


def _order(item: tuple[Where, Line]) -> tuple[str, ...]:
    return tuple("" if part is None else part for part in item[0])


def _add_usage(side: Side, usage: UsageRow) -> None:
    for name in TOKEN_CLASSES:
        side.tokens[name] += usage.tokens.get(name, 0)
    side.batch = side.batch or (usage.batch and any(usage.tokens.get(n, 0) for n in TOKEN_CLASSES))
    side.seen = side.seen or any(usage.tokens.get(n, 0) for n in TOKEN_CLASSES)


def _add_cost(side: Side, amount: Decimal, batch: bool) -> None:
    side.cost += amount
    side.batch = side.batch or (batch and amount != 0)
    side.seen = side.seen or amount != 0


def _add_costs(fetched: Fetched, lines: dict[Where, Line]) -> None:
    shared: dict[tuple[Any, ...], list[UsageRow]] = defaultdict(list)
    for usage in fetched.usage:
        shared[(usage.day, usage.scope, usage.model, usage.tier, usage.window)].append(usage)
    for cost in fetched.costs:
        if cost.kind != "tokens":
            _add_cost(
                lines[_where(cost.day, FEES if cost.kind == "fee" else CREDITS, None, None)].provider,
                cost.amount,
                cost.batch,
            )
        elif fetched.costs_by_key:
            _add_cost(lines[_where(cost.day, cost.model, cost.scope, cost.key_id)].provider, cost.amount, cost.batch)
        else:
            for key_id, amount in _shares(cost, shared[(cost.day, cost.scope, cost.model, cost.tier, cost.window)]):
                _add_cost(lines[_where(cost.day, cost.model, cost.scope, key_id)].provider, amount, cost.batch)


def _shares(cost: CostRow, usage: list[UsageRow]) -> list[tuple[str | None, Decimal]]:
    """An Anthropic token cost shared over the keys by their tokens of its type."""
    part = "_" + ANTHROPIC_TOKEN_TYPES.get(cost.token_type or "", "")
    weights: dict[str | None, int] = defaultdict(int)
    for row in usage:
        weights[row.key_id] += row.tokens.get(part, 0)
    total = sum(weights.values())
    if total == 0:
        return [(None, cost.amount)]
    keys = sorted(weights, key=lambda k: "" if k is None else k)
    out: list[tuple[str | None, Decimal]] = []
    left = cost.amount
    for key_id in keys[:-1]:
        share = (cost.amount * weights[key_id] / total).quantize(PICO)
        out.append((key_id, share))
        left -= share
    return [*out, (keys[-1], left)]


def _tails(fetched: Fetched) -> list[tuple[str, str]]:
    """(hint tail, key id) of every listed key, by id."""
    return sorted(
        ((tail, key_id) for key_id, (tail, _scope) in fetched.keys.items() if len(tail) >= 2), key=lambda t: t[1]
    )


def _last4(key: Any) -> str | None:
    """The last four of `report cost`'s key column ("…ABCD 1a2b3c4d", "(no key)")."""
    if not isinstance(key, str) or not key.startswith("…"):
        return None
    return key[1:].split(" ", 1)[0] or None


def _add_recorded(
    lines: dict[Where, Line], row: dict[str, Any], by_tail: list[tuple[str, str]], fetched: Fetched
) -> None:
    last4 = _last4(row.get("key"))
    key_id: str | None = None
    scope: str | None = None
    if last4 is not None:
        match = next((key for tail, key in by_tail if last4.endswith(tail)), None)
        key_id = match if match is not None else f"llmtap:{last4}"
        scope = fetched.keys[match][1] if match is not None else None
    cost = Decimal(row.get("cost_usd") or 0)
    fee = Decimal(row.get("fee_cost_usd") or 0)
    side = lines[_where(str(row["day"]), row.get("model"), scope, key_id)].llmtap
    for name in TOKEN_CLASSES:
        side.tokens[name] += int(row.get(name) or 0)
    side.cost += cost - fee
    side.requests += int(row.get("requests") or 0)
    side.unpriced += int(row.get("unpriced") or 0) + int(row.get("usage_missing") or 0)
    if fee:
        fees = lines[_where(str(row["day"]), FEES, None, None)].llmtap
        fees.cost += fee
        fees.requests += int(row.get("requests") or 0)


def _shown_key(key_id: str | None, fetched: Fetched) -> str | None:
    if key_id is None:
        return None
    if key_id.startswith("llmtap:"):
        return "…" + key_id.removeprefix("llmtap:")
    if key_id in fetched.keys:
        return "…" + fetched.keys[key_id][0]
    return key_id  # a key id the listing does not show (an id, never a secret)


def causes(model: str | None, line: Line) -> list[str]:
    """The likely causes of one row's gap (the module docstring has the rules)."""
    mine, theirs = line.llmtap, line.provider
    gap = abs(theirs.cost - mine.cost) >= CENT_HALF
    tokens_differ = any(mine.tokens[n] != theirs.tokens[n] for n in TOKEN_CLASSES)
    if model in (FEES, CREDITS):
        return [("fees" if model == FEES else "credits")] if gap else []
    found: set[str] = set()
    if theirs.seen and mine.requests == 0:
        found.add("not_recorded")
    if mine.unpriced:
        found.add("unpriced")
    if mine.requests and tokens_differ:
        found.add("tokens_differ")
    if not tokens_differ and gap and not mine.unpriced:
        found.add("price_differs")
    if theirs.batch and (gap or tokens_differ):
        found.add("batch")
    return [c for c in CAUSES if c in found]


def _row(where: Where, line: Line, scope: str, fetched: Fetched) -> dict[str, Any]:
    day, model, scope_id, key_id = where
    row: dict[str, Any] = {"day": day, "model": model, scope: scope_id, "key": _shown_key(key_id, fetched)}
    for name in TOKEN_CLASSES:
        row[f"provider_{name}"] = line.provider.tokens[name]
        row[f"llmtap_{name}"] = line.llmtap.tokens[name]
    row["provider_cost_usd"] = line.provider.cost
    row["llmtap_cost_usd"] = line.llmtap.cost
    row["gap_usd"] = line.provider.cost - line.llmtap.cost
    row["causes"] = causes(model, line)
    return row


def _totals(rows: list[dict[str, Any]], columns: list[str]) -> dict[str, Any]:
    total: dict[str, Any] = dict.fromkeys(columns)
    total["day"] = "total"
    for column in columns[4:-1]:
        total[column] = sum((row[column] for row in rows), Decimal(0) if column.endswith("_usd") else 0)
    found = {cause for row in rows for cause in row["causes"]}
    total["causes"] = [c for c in CAUSES if c in found]
    return total
