"""What `llmtap reconcile` reads from a provider: the Anthropic Admin API's Messages usage
report, cost report and API key listing, or OpenAI's organization completions usage, costs,
projects and project keys (docs/reconcile-sources.md has the facts and their sources),
fetched over HTTPS with the admin key and turned into provider-neutral rows.

Every fetch is bounded: a timeout per request, a largest response body, a largest number
of pages per walk (a cursor that repeats or never ends is refused), no redirects (a
redirect would carry the admin key to another host). A refusal, a malformed body or a
broken connection is one `SourceError` line, and the admin key is scrubbed from it.

Token counts follow llmtap's canonical classes (SPEC §2): `input_tokens` includes the
cache reads and writes (Anthropic: uncached + cache read + both cache writes; OpenAI's
`input_tokens` already includes the cached ones). Money is Decimal dollars (Anthropic
reports cents as decimal strings; OpenAI dollars as JSON numbers, read as Decimal).

Not responsible for matching the rows to what llmtap recorded (analytics/reconcile.py) nor
for where the admin key comes from (the CLI reads it from the environment).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal, InvalidOperation
from typing import Any
from urllib.parse import urlencode, urlsplit

TOKEN_CLASSES = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens")
ANTHROPIC_BASE = "https://api.anthropic.com"
OPENAI_BASE = "https://api.openai.com"


LOOPBACK = ("127.0.0.1", "localhost", "::1")


def secret_free(text: str, secret: str) -> str:
    return text.replace(secret, "[admin key]") if secret else text


class SourceError(Exception):
    """A provider report that could not be read: one line, without the admin key."""


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 30.0
    max_bytes: int = 8 << 20  # one response body
    max_pages: int = 200  # one walk (a report, a listing)


@dataclass(frozen=True)
class UsageRow:
    day: date
    model: str | None
    key_id: str | None
    scope: str | None  # the workspace (Anthropic) or project (OpenAI)
    tokens: dict[str, int]
    batch: bool = False
    tier: str | None = None  # Anthropic: service tier and context window, to share a cost out
    window: str | None = None


@dataclass(frozen=True)
class CostRow:
    """One line item: `kind` tokens (a model's token cost), fee (web search, code
    execution, any other non-token cost) or credit (a negative amount, or one the provider
    calls a credit)."""

    day: date
    amount: Decimal  # dollars
    kind: str
    model: str | None = None
    key_id: str | None = None
    scope: str | None = None
    token_type: str | None = None
    batch: bool = False
    tier: str | None = None
    window: str | None = None
    label: str | None = None


@dataclass
class Fetched:
    provider: str
    usage: list[UsageRow] = field(default_factory=list)
    costs: list[CostRow] = field(default_factory=list)
    keys: dict[str, tuple[str, str | None]] = field(default_factory=dict)  # key id -> (hint tail, scope)
    # True when the cost rows name their key (OpenAI); Anthropic's are shared out by tokens
    costs_by_key: bool = False


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # the 3xx reaches the caller as an HTTPError, the key stays here


class Client:
    """GETs of one provider's admin API: JSON objects, bounded, errors scrubbed."""

    def __init__(self, base: str, headers: dict[str, str], secret: str, limits: Limits) -> None:
        parts = urlsplit(base)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise SourceError(f"--api-base must be an http(s) URL, not {secret_free(base, secret)!r}")
        if parts.scheme == "http" and parts.hostname not in LOOPBACK:
            raise SourceError(
                "--api-base: plain http only to this machine (127.0.0.1, localhost): the key is never sent in clear"
            )
        self.base = base.rstrip("/")
        self.headers = headers
        self.secret = secret
        self.limits = limits
        self.opener = urllib.request.build_opener(_NoRedirect())

    def scrub(self, text: str) -> str:
        text = secret_free(text, self.secret)
        return " ".join(text.split())[:300]

    def get(self, path: str, params: list[tuple[str, str]]) -> dict[str, Any]:
        url = f"{self.base}{path}" + (f"?{urlencode(params)}" if params else "")
        request = urllib.request.Request(url, headers={**self.headers, "accept": "application/json"})
        what = path.rsplit("/", 1)[-1] or path
        try:
            with self.opener.open(request, timeout=self.limits.timeout_s) as response:
                body = response.read(self.limits.max_bytes + 1)
        except urllib.error.HTTPError as error:
            raise SourceError(self.scrub(f"{what}: HTTP {error.code} {_said(error, self.limits.max_bytes)}")) from None
        except (TimeoutError, urllib.error.URLError, OSError, ValueError) as error:
            reason = getattr(error, "reason", None) or error
            raise SourceError(self.scrub(f"{what}: cannot reach {self.base}: {reason}")) from None
        if len(body) > self.limits.max_bytes:
            raise SourceError(f"{what}: the response is larger than {self.limits.max_bytes} bytes")
        try:
            payload = json.loads(body, parse_float=Decimal)
        except (ValueError, RecursionError):
            raise SourceError(f"{what}: the response is not JSON") from None
        if not isinstance(payload, dict):
            raise SourceError(f"{what}: the response is not a JSON object")
        return payload


def _said(error: urllib.error.HTTPError, limit: int) -> str:
    """What a refusal's body says (its error message), or nothing."""
    try:
        payload = json.loads(error.read(min(limit, 64 << 10)))
        message = payload.get("error", {}).get("message") if isinstance(payload, dict) else None
        if not isinstance(message, str):
            return ""
        return "(" + "".join(c if c.isprintable() else " " for c in message[:200]) + ")"
    except (ValueError, OSError, AttributeError, RecursionError):
        return ""


def walk_report(client: Client, path: str, params: list[tuple[str, str]]) -> Iterator[dict[str, Any]]:
    """Every bucket of a report, page after page (`has_more` / `next_page`), bounded."""
    seen: set[str] = set()
    page: str | None = None
    for _ in range(client.limits.max_pages):
        body = client.get(path, params + ([("page", page)] if page else []))
        data = body.get("data")
        if not isinstance(data, list):
            raise SourceError(f"{path}: malformed response: `data` is not a list")
        for bucket in data:
            if not isinstance(bucket, dict) or not isinstance(bucket.get("results"), list):
                raise SourceError(f"{path}: malformed response: a bucket without `results`")
            yield bucket
        if not body.get("has_more"):
            return
        page = body.get("next_page")
        if not isinstance(page, str) or not page or len(page) > 4096 or page in seen:
            raise SourceError(f"{path}: malformed response: has_more without a new next_page")
        seen.add(page)
    raise SourceError(f"{path}: more than {client.limits.max_pages} pages: refused")


def walk_list(client: Client, path: str, params: list[tuple[str, str]], cursor: str) -> Iterator[dict[str, Any]]:
    """Every object of a listing (`after_id`/`after` = the last `last_id`), bounded."""
    seen: set[str] = set()
    after: str | None = None
    for _ in range(client.limits.max_pages):
        body = client.get(path, params + ([(cursor, after)] if after else []))
        data = body.get("data")
        if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
            raise SourceError(f"{path}: malformed response: `data` is not a list of objects")
        yield from data
        if not body.get("has_more"):
            return
        after = body.get("last_id")
        if not isinstance(after, str) or not after or len(after) > 4096 or after in seen:
            raise SourceError(f"{path}: malformed response: has_more without a new last_id")
        seen.add(after)
    raise SourceError(f"{path}: more than {client.limits.max_pages} pages: refused")


def _count(result: dict[str, Any], *names: str) -> int:
    value: Any = result
    for name in names:
        value = value.get(name) if isinstance(value, dict) else None
    if value is None:
        return 0
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 1 << 53:
        raise SourceError(f"malformed response: `{'.'.join(names)}` is not a token count")
    return value


def _text(result: dict[str, Any], name: str) -> str | None:
    value = result.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > 500:
        raise SourceError(f"malformed response: `{name}` is not a string")
    return value


def _money(value: Any, what: str) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, (str, int, Decimal)):
        raise SourceError(f"malformed response: `{what}` is not an amount")
    try:
        amount = Decimal(value)
    except (InvalidOperation, ValueError):
        raise SourceError(f"malformed response: `{what}` is not an amount") from None
    if not amount.is_finite() or abs(amount) > Decimal(10) ** 15:
        raise SourceError(f"malformed response: `{what}` is not an amount")
    return amount


def hint_tail(hint: str) -> str:
    """The characters a partial key hint shows of the key's end ("sk-ant-api03-R2D...igAA"
    -> "igAA"; at most four, as llmtap keeps)."""
    tail = hint.replace("…", "...").rsplit("...", 1)[-1]
    return tail[-4:]


def _rfc3339(day: date) -> str:
    return f"{day.isoformat()}T00:00:00Z"


def _unix(day: date) -> int:
    return int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp())


def _bucket_day(bucket: dict[str, Any], name: str, parse: Callable[[Any], datetime]) -> date:
    try:
        return parse(bucket[name]).astimezone(UTC).date()
    except (KeyError, TypeError, ValueError, OverflowError, OSError):
        raise SourceError(f"malformed response: a bucket's `{name}` is not a time") from None


def _iso(value: Any) -> datetime:
    moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    if moment.tzinfo is None:
        raise ValueError("no zone")
    return moment


def _seconds(value: Any) -> datetime:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError("not Unix seconds")
    return datetime.fromtimestamp(value, UTC)


# -- Anthropic ------------------------------------------------------------------------------

# a cost line's token_type -> the usage field whose tokens it prices (to share it out by key)
ANTHROPIC_TOKEN_TYPES = {
    "uncached_input_tokens": "uncached",
    "cache_read_input_tokens": "cache_read",
    "cache_creation.ephemeral_5m_input_tokens": "write_5m",
    "cache_creation.ephemeral_1h_input_tokens": "write_1h",
    "output_tokens": "output",
}


def fetch_anthropic(base: str | None, admin_key: str, since: date, until: date, limits: Limits) -> Fetched:
    """Usage by key × workspace × model × tier × context window, costs by workspace ×
    description, keys with their hints, for the UTC days [since, until)."""
    client = Client(
        base or ANTHROPIC_BASE, {"x-api-key": admin_key, "anthropic-version": "2023-06-01"}, admin_key, limits
    )
    window = [("starting_at", _rfc3339(since)), ("ending_at", _rfc3339(until)), ("bucket_width", "1d")]
    fetched = Fetched("anthropic")
    groups = [("group_by[]", g) for g in ("api_key_id", "workspace_id", "model", "service_tier", "context_window")]
    for bucket in walk_report(client, "/v1/organizations/usage_report/messages", [*window, ("limit", "31"), *groups]):
        day = _bucket_day(bucket, "starting_at", _iso)
        for result in bucket["results"]:
            fetched.usage.append(_anthropic_usage(day, result))
    cost_groups = [("group_by[]", "workspace_id"), ("group_by[]", "description")]
    for bucket in walk_report(client, "/v1/organizations/cost_report", [*window, ("limit", "31"), *cost_groups]):
        day = _bucket_day(bucket, "starting_at", _iso)
        for result in bucket["results"]:
            fetched.costs.append(_anthropic_cost(day, result))
    for key in walk_list(client, "/v1/organizations/api_keys", [("limit", "1000")], "after_id"):
        key_id, hint = _text(key, "id"), _text(key, "partial_key_hint")
        if key_id and hint:
            fetched.keys[key_id] = (hint_tail(hint), _text(key, "workspace_id"))
    return fetched


def _anthropic_usage(day: date, result: dict[str, Any]) -> UsageRow:
    if not isinstance(result, dict):
        raise SourceError("malformed response: a usage result is not an object")
    parts = {
        "uncached": _count(result, "uncached_input_tokens"),
        "cache_read": _count(result, "cache_read_input_tokens"),
        "write_5m": _count(result, "cache_creation", "ephemeral_5m_input_tokens"),
        "write_1h": _count(result, "cache_creation", "ephemeral_1h_input_tokens"),
        "output": _count(result, "output_tokens"),
    }
    write = parts["write_5m"] + parts["write_1h"]
    tokens = {
        "input_tokens": parts["uncached"] + parts["cache_read"] + write,
        "cache_read_tokens": parts["cache_read"],
        "cache_write_tokens": write,
        "output_tokens": parts["output"],
        **{f"_{name}": value for name, value in parts.items()},  # kept to share costs out
    }
    tier = _text(result, "service_tier")
    return UsageRow(
        day,
        _text(result, "model"),
        _text(result, "api_key_id"),
        _text(result, "workspace_id"),
        tokens,
        batch=tier == "batch",
        tier=tier,
        window=_text(result, "context_window"),
    )


def _anthropic_cost(day: date, result: dict[str, Any]) -> CostRow:
    if not isinstance(result, dict):
        raise SourceError("malformed response: a cost result is not an object")
    amount = _money(result.get("amount"), "amount") / 100  # cents, as a decimal string
    cost_type, description = _text(result, "cost_type"), _text(result, "description") or ""
    tier = _text(result, "service_tier")
    credit = amount < 0 or "credit" in description.lower() or "credit" in (cost_type or "")
    kind = "credit" if credit else "tokens" if cost_type == "tokens" and _text(result, "model") else "fee"
    return CostRow(
        day,
        amount,
        kind,
        model=_text(result, "model"),
        scope=_text(result, "workspace_id"),
        token_type=_text(result, "token_type"),
        batch=tier == "batch" or "batch" in description.lower(),
        tier=tier,
        window=_text(result, "context_window"),
        label=description or cost_type,
    )


# -- OpenAI ---------------------------------------------------------------------------------


def fetch_openai(base: str | None, admin_key: str, since: date, until: date, limits: Limits) -> Fetched:
    """Usage by project × key × model × batch, costs by project × key × line item, and the
    keys of every project, for the UTC days [since, until)."""
    client = Client(base or OPENAI_BASE, {"authorization": f"Bearer {admin_key}"}, admin_key, limits)
    window = [("start_time", str(_unix(since))), ("end_time", str(_unix(until))), ("bucket_width", "1d")]
    fetched = Fetched("openai", costs_by_key=True)
    groups = [("group_by", g) for g in ("project_id", "api_key_id", "model", "batch")]
    for bucket in walk_report(client, "/v1/organization/usage/completions", [*window, ("limit", "31"), *groups]):
        day = _bucket_day(bucket, "start_time", _seconds)
        for result in bucket["results"]:
            fetched.usage.append(_openai_usage(day, result))
    cost_groups = [("group_by", g) for g in ("project_id", "api_key_id", "line_item")]
    for bucket in walk_report(client, "/v1/organization/costs", [*window, ("limit", "180"), *cost_groups]):
        day = _bucket_day(bucket, "start_time", _seconds)
        for result in bucket["results"]:
            fetched.costs.append(_openai_cost(day, result))
    for project in walk_list(client, "/v1/organization/projects", [("limit", "100")], "after"):
        project_id = _text(project, "id")
        if not project_id or "/" in project_id:
            continue
        for key in walk_list(client, f"/v1/organization/projects/{project_id}/api_keys", [("limit", "100")], "after"):
            key_id, hint = _text(key, "id"), _text(key, "redacted_value")
            if key_id and hint:
                fetched.keys[key_id] = (hint_tail(hint), project_id)
    return fetched


def _openai_usage(day: date, result: dict[str, Any]) -> UsageRow:
    if not isinstance(result, dict):
        raise SourceError("malformed response: a usage result is not an object")
    cached = _count(result, "input_cached_tokens")
    tokens = {
        "input_tokens": _count(result, "input_tokens"),  # includes the cached (and cache-write) ones
        "cache_read_tokens": cached,
        "cache_write_tokens": _count(result, "input_cache_write_tokens"),
        "output_tokens": _count(result, "output_tokens"),
    }
    return UsageRow(
        day,
        _text(result, "model"),
        _text(result, "api_key_id"),
        _text(result, "project_id"),
        tokens,
        batch=result.get("batch") is True,
    )


def _openai_cost(day: date, result: dict[str, Any]) -> CostRow:
    """A line item "MODEL, CLASS" is a token cost of MODEL; anything else is a fee, or a
    credit when negative or called one; "batch" in it marks batch pricing."""
    if not isinstance(result, dict):
        raise SourceError("malformed response: a cost result is not an object")
    amount_of = result.get("amount")
    value = amount_of.get("value") if isinstance(amount_of, dict) else None
    amount = _money(value if value is not None else 0, "amount.value")
    line = _text(result, "line_item") or ""
    model, _, what = line.partition(", ")
    words = line.lower()
    token = bool(what) and any(word in what.lower() for word in ("input", "output", "cache"))
    kind = "credit" if amount < 0 or "credit" in words else "tokens" if token else "fee"
    return CostRow(
        day,
        amount,
        kind,
        model=model.strip() if kind == "tokens" else None,
        key_id=_text(result, "api_key_id"),
        scope=_text(result, "project_id"),
        token_type=what.strip() or None,
        batch="batch" in words,
        label=line or None,
    )
