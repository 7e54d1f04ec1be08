"""The label values a metric may carry, bounded so that no client can grow the number of
series without limit (a scrape, and the Prometheus behind it, stay small whatever the
traffic).

How each label is bounded:
- provider: genai-prices' provider ids (a fixed set of a few dozen) and the names of the
  config's `[[providers]]`, else `other`;
- model: the first `models` distinct models the store priced (known to the price
  catalogue), and the first `unpriced_models` of those it did not, else `other`; no model
  is `unknown`;
- team: the first `teams` distinct teams, else `other` (a client that names a new team in
  every request fills the cap once and adds nothing after);
- finish_reason: the canonical set (SPEC §2), else `other`; none is `unknown`;
- tool status: toolcheck's statuses, else `other`;
- tags (the `llmtap_tag_*` counters' `tag` and `value`): the first `tags` distinct tag
  names, else `other` in both; of each kept name, values up to `tag_values` distinct
  (tag, value) pairs in all, else that name's `other`;
- and, whatever the above allow, at most `series` distinct (team, provider, model)
  triples: any more are `other` in all three;
- every value at most `MAX_LENGTH` (128) characters (SPEC §6): a longer one keeps its
  first characters and a digest of the whole (`bounded`), so two long names stay two
  series and a 5,000-character model name costs a scrape 128 characters a sample.

The values already taken are seeded from the counters a previous writer process of the
same proxy run left (`seed`), so a restart does not open the caps again.

Not responsible for counting (metrics_count.py) or for what the label values mean.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

OTHER = "other"
UNKNOWN = "unknown"
MAX_LENGTH = 128  # characters of one label value (SPEC §6)
_DIGEST = 8  # hex digits of the whole value's digest that end a shortened one


def bounded(value: str) -> str:
    """`value` if it is at most MAX_LENGTH characters, else its start, `…` and a digest of
    the whole: MAX_LENGTH characters, the same for the same value, different for another."""
    if len(value) <= MAX_LENGTH:
        return value
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST]
    return f"{value[: MAX_LENGTH - _DIGEST - 1]}…{digest}"


def _providers() -> frozenset[str]:
    from genai_prices import data_snapshot

    return frozenset(provider.id for provider in data_snapshot.get_snapshot().providers)


def _finish_reasons() -> frozenset[str]:
    from llmtap.protocols.canonical import FINISH_REASONS

    return frozenset(FINISH_REASONS)


def _tool_statuses() -> frozenset[str]:
    from llmtap.protocols.toolcheck import STATUSES

    return frozenset(STATUSES)


class Labels:
    """First come, first kept, up to the caps; then `other`."""

    def __init__(
        self, *, teams: int, models: int, unpriced_models: int, series: int, providers: Iterable[str] = (),
        tags: int = 20, tag_values: int = 1000,
    ) -> None:  # fmt: skip
        self.caps = {"team": teams, "model": models, "unpriced": unpriced_models}
        self.series_cap = series
        self.providers = _providers() | frozenset(bounded(name) for name in providers)
        self.finish_reasons = _finish_reasons()
        self.tool_statuses = _tool_statuses()
        self.teams: set[str] = set()
        self.models: set[str] = set()
        self.unpriced: set[str] = set()
        self.triples: set[tuple[str, str, str]] = set()
        self.tag_caps = (tags, tag_values)
        self.tag_names: set[str] = set()
        self.tag_pairs: set[tuple[str, str]] = set()

    def seed(self, triples: Iterable[tuple[str, str, str]]) -> None:
        """Values a previous process of the same run already gave out (its counters)."""
        for team, provider, model in ((bounded(t), bounded(p), bounded(m)) for t, p, m in triples):
            self.teams.add(team)
            self.models.add(model)  # priced or not, it keeps its series
            self.triples.add((team, provider, model))

    def seed_tags(self, pairs: Iterable[tuple[str, str]]) -> None:
        """Tag labels a previous process of the same run already gave out."""
        for name, value in pairs:
            if name != OTHER:
                self.tag_names.add(name)
            if value != OTHER:
                self.tag_pairs.add((name, value))

    def tag(self, name: str, value: str) -> tuple[str, str]:
        """The (tag, value) labels of one tag an exchange carries."""
        name, value = bounded(name), bounded(value)
        if name not in self.tag_names:
            if len(self.tag_names) >= self.tag_caps[0]:
                return (OTHER, OTHER)
            self.tag_names.add(name)
        pair = (name, value)
        if pair in self.tag_pairs:
            return pair
        if len(self.tag_pairs) >= self.tag_caps[1]:
            return (name, OTHER)
        self.tag_pairs.add(pair)
        return pair

    def who(self, team: str | None, provider: str | None, model: str | None, priced: bool) -> tuple[str, str, str]:
        """The (team, provider, model) labels of one exchange."""
        triple = (self.team(team), self.provider(provider), self.model(model, priced))
        if triple in self.triples:
            return triple
        if len(self.triples) >= self.series_cap:
            return (OTHER, OTHER, OTHER)
        self.triples.add(triple)
        return triple

    def team(self, team: str | None) -> str:
        name = bounded(team or UNKNOWN)
        if name in self.teams:
            return name
        if len(self.teams) >= self.caps["team"]:
            return OTHER
        self.teams.add(name)
        return name

    def provider(self, provider: str | None) -> str:
        if provider is None:
            return UNKNOWN
        return provider if provider in self.providers else OTHER

    def model(self, model: str | None, priced: bool) -> str:
        if model is None:
            return UNKNOWN
        model = bounded(model)
        if model in self.models:
            return model
        if priced:
            if len(self.models) - len(self.unpriced) >= self.caps["model"]:
                return OTHER
        elif len(self.unpriced) >= self.caps["unpriced"]:
            return OTHER
        else:
            self.unpriced.add(model)
        self.models.add(model)
        return model

    def finish_reason(self, reason: str | None) -> str:
        if reason is None:
            return UNKNOWN
        return reason if reason in self.finish_reasons else OTHER

    def tool_status(self, status: str | None) -> str:
        return status if status in self.tool_statuses else OTHER
