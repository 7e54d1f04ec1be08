"""The counting side of the Prometheus metrics: an Observer (storage.writer) that turns the
rows each commit added into counters and histograms, in the writer's process.

The values live in prometheus-client's multiprocess files (one folder per proxy run, see
metrics.py): this process writes them, the proxy's process reads and serves them
(metrics_serve.py). A writer process that is restarted starts new files beside the dead
one's, and the reader sums them all, so counters survive a restart; the label values the
dead one gave out are read back so the caps hold across restarts (metrics_labels.py).

What is counted (each exchange once, as stored; a count the provider did not report adds
nothing, it is not zero): requests by team, provider, model and finish reason; tokens by
kind; cost in USD (the rows' priced cost; an unpriced row adds nothing); decode errors by
provider; time to first token and total time by provider and model; prompt-cache misses
and the tokens they missed by cause, and would-be misses that were `not_cacheable`: the
exchange's stored cache verdict, as the commit stored it (storage/verdicts.py decided it
before the writer handed the rows over; a later write that lands before it and changes it
is not counted again); tool-call problems by the status the record got when it was
checked against its request's schema (the conversation-level checks of `report tools`,
duplicate ids and missing or orphan results, need later requests and are not counted).

Not responsible for serving the metrics (metrics_serve.py), for bounding label values
(metrics_labels.py) or for deciding any verdict (the writer stores them by
protocols/rules.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from llmtap.protocols.who_asked import stored_tags
from llmtap.storage.private import private_dir
from llmtap.storage.rows import RowSet
from llmtap.telemetry.metrics_labels import Labels, bounded

WHO = ("team", "provider", "model")
TAG = ("tag", "value")
# Seconds. An LLM call takes from well under a second to minutes (long outputs, reasoning).
BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0)
TOKEN_KINDS = (
    ("input", "usage_input_tokens"),  # includes cached reads and writes (SPEC §2)
    ("cache_read", "usage_cache_read_input_tokens"),
    ("cache_write", "usage_cache_creation_input_tokens"),
    ("output", "usage_output_tokens"),  # includes reasoning
    ("reasoning", "usage_reasoning_output_tokens"),
)
PICO = 10**12


def multiprocess(folder: Path) -> None:
    """Make every metric this process creates from now on write to `folder`.

    prometheus-client picks its value class when it is first imported, from
    PROMETHEUS_MULTIPROC_DIR; this process may have imported it already (a writer thread
    in the proxy's own process, after the writer process kept failing), so the class is
    set again here, which is what the library does at import.

    The library's class keeps the files it opened, named from the folder of its first
    value: a class made for another folder (an earlier writer of this process) would
    still write there, so it is replaced too."""
    private_dir(folder)  # team and model names: private like the spool beside it
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(folder)
    from prometheus_client import values

    current = values.ValueClass
    if not getattr(current, "_multiprocess", False) or getattr(current, "_llmtap_folder", None) != str(folder):
        made = values.get_value_class()
        made._llmtap_folder = str(folder)
        values.ValueClass = made


def seen_tags(folder: Path) -> Iterator[tuple[str, str]]:
    """The (tag, value) labels earlier processes of this run counted under."""
    from prometheus_client import CollectorRegistry
    from prometheus_client.multiprocess import MultiProcessCollector

    for family in MultiProcessCollector(CollectorRegistry(auto_describe=False), path=str(folder)).collect():
        if family.name == "llmtap_tag_requests":
            for sample in family.samples:
                yield sample.labels["tag"], sample.labels["value"]


def seen_triples(folder: Path) -> Iterator[tuple[str, str, str]]:
    """The (team, provider, model) labels earlier processes of this run counted under."""
    from prometheus_client import CollectorRegistry
    from prometheus_client.multiprocess import MultiProcessCollector

    for family in MultiProcessCollector(CollectorRegistry(auto_describe=False), path=str(folder)).collect():
        if family.name == "llmtap_requests":
            for sample in family.samples:
                yield sample.labels["team"], sample.labels["provider"], sample.labels["model"]


class Counting:
    """The observer. `observe` runs on the writer's thread after each commit."""

    def __init__(self, folder: Path, labels: Labels) -> None:
        multiprocess(folder)
        from prometheus_client import CollectorRegistry, Counter, Histogram

        labels.seed(seen_triples(folder))
        labels.seed_tags(seen_tags(folder))
        self.labels = labels
        # A registry of its own: the values go to the files, nothing here is served.
        registry = CollectorRegistry(auto_describe=False)

        def counter(name: str, doc: str, names: list[str] | tuple[str, ...] = ()) -> _Bounded:
            return _Bounded(Counter(name, doc, names, registry=registry))

        def histogram(name: str, doc: str) -> _Bounded:
            return _Bounded(Histogram(name, doc, ["provider", "model"], buckets=BUCKETS, registry=registry))

        self.requests = counter("llmtap_requests", "Exchanges recorded", [*WHO, "finish_reason"])
        self.tokens = counter("llmtap_tokens", "Tokens as billed, by kind", [*WHO, "kind"])
        self.cost = counter("llmtap_cost_usd", "Priced cost in US dollars", WHO)
        # by tag (SPEC §4): a series per (tag, value), both bounded (metrics_labels.py)
        self.tag_requests = counter("llmtap_tag_requests", "Exchanges recorded, by each tag they carry", TAG)
        self.tag_cost = counter("llmtap_tag_cost_usd", "Priced cost in US dollars, by each tag", TAG)
        self.decode_errors = counter("llmtap_decode_errors", "Exchanges stored with a decode error", ["provider"])
        self.cache_misses = counter(
            "llmtap_cache_misses", "Prompt-cache misses (the stored verdicts), by cause", ["cause"]
        )
        self.cache_missed_tokens = counter(
            "llmtap_cache_missed_tokens", "Input tokens a cache hit would have read, of the misses, by cause", ["cause"]
        )
        self.not_cacheable = counter(
            "llmtap_cache_not_cacheable",
            "Would-be cache misses whose previous request was under the model's minimum cacheable length",
        )
        self.tool_problems = counter(
            "llmtap_tool_problems", "Tool calls whose check found a problem, by status", ["status"]
        )
        self.ttft = histogram("llmtap_time_to_first_token_seconds", "From request to the first token of the answer")
        self.duration = histogram("llmtap_request_duration_seconds", "From request to the end of the answer")

    def observe(self, rows: RowSet) -> None:
        for row in rows.exchanges:
            self._exchange(row)
        for call in rows.tool_calls:
            if call.get("status") != "valid":
                self.tool_problems.labels(self.labels.tool_status(call.get("status"))).inc()

    def _exchange(self, row: Mapping[str, Any]) -> None:
        who = self.labels.who(row.get("team"), row.get("provider"), row.get("model"), _priced(row))
        self.requests.labels(*who, self.labels.finish_reason(row.get("finish_reason"))).inc()
        for kind, column in TOKEN_KINDS:
            count = row.get(column)
            if count:  # None is not zero: it adds nothing; nor does 0
                self.tokens.labels(*who, kind).inc(count)
        pico = row.get("cost_total_pico")
        if pico is not None:
            self.cost.labels(*who).inc(pico / PICO)
        for name, value in stored_tags(row.get("tags")).items():
            pair = self.labels.tag(name, value)
            self.tag_requests.labels(*pair).inc()
            if pico is not None:
                self.tag_cost.labels(*pair).inc(pico / PICO)
        if row.get("decode_error") is not None:
            self.decode_errors.labels(who[1]).inc()
        for histogram, column in ((self.ttft, "ttft_ms"), (self.duration, "duration_ms")):
            millis = row.get(column)
            if millis is not None:
                histogram.labels(who[1], who[2]).observe(millis / 1000)
        verdict = row.get("cache_verdict")
        if verdict == "not_cacheable":
            self.not_cacheable.inc()
        elif verdict == "miss":
            cause = str(row.get("cache_cause"))
            self.cache_misses.labels(cause).inc()
            missed = row.get("cache_missed_tokens")
            if missed:
                self.cache_missed_tokens.labels(cause).inc(missed)

    def close(self) -> None:
        """The files stay: the proxy's side reads them until it stops."""


class _Bounded:
    """A metric whose label values are cut to MAX_LENGTH (metrics_labels.bounded) whoever
    passes them: no value longer reaches the counters' files or a scrape (SPEC §6)."""

    def __init__(self, metric: Any) -> None:
        self.metric = metric

    def labels(self, *values: str) -> Any:
        return self.metric.labels(*(bounded(str(value)) for value in values))

    def inc(self, amount: float = 1) -> None:
        self.metric.inc(amount)


def _priced(row: Mapping[str, Any]) -> bool:
    return row.get("price_status") == "priced"
