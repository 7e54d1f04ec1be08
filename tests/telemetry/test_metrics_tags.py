"""The `llmtap_tag_*` counters (SPEC §4: bounded labels in metrics): a series per (tag,
value) an exchange carries, both labels capped whatever the clients send, counted into
the multiprocess files the endpoint serves. Not responsible for the other counters
(test_metrics_units.py, test_metrics_proxy.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from llmtap.storage.rows import RowSet
from llmtap.telemetry.metrics_count import Counting
from llmtap.telemetry.metrics_labels import MAX_LENGTH, OTHER, Labels


def _labels(**caps: int) -> Labels:
    return Labels(
        **({"teams": 3, "models": 2, "unpriced_models": 1, "series": 1000, "tags": 2, "tag_values": 3} | caps)
    )


def test_tag_names_and_values_past_their_caps_are_other() -> None:
    labels = _labels()
    assert labels.tag("project", "atlas") == ("project", "atlas")
    assert labels.tag("feature", "search") == ("feature", "search")
    assert labels.tag("env", "prod") == (OTHER, OTHER)  # a third name
    assert labels.tag("project", "zephyr") == ("project", "zephyr")
    assert labels.tag("project", "new") == ("project", OTHER)  # a fourth pair
    assert labels.tag("project", "atlas") == ("project", "atlas")  # known ones keep their name
    name, value = labels.tag("feature", "v" * 5000)
    assert name == "feature" and value == OTHER
    assert all(len(v) <= MAX_LENGTH for v in _labels(tag_values=10).tag("x" * 500, "y" * 500))


def _samples(folder: Path, family: str) -> dict[tuple[str, str], float]:
    from prometheus_client import CollectorRegistry
    from prometheus_client.multiprocess import MultiProcessCollector

    out: dict[tuple[str, str], float] = {}
    for found in MultiProcessCollector(CollectorRegistry(auto_describe=False), path=str(folder)).collect():
        if found.name == family:
            for sample in found.samples:
                if sample.name.endswith("_total"):
                    out[(sample.labels["tag"], sample.labels["value"])] = sample.value
    return out


def _row(tags: Any, pico: int | None) -> dict[str, Any]:
    return {"id": "x", "team": "t", "provider": "anthropic", "model": "claude-x", "tags": tags, "cost_total_pico": pico}


def test_exchanges_count_under_each_tag_they_carry(tmp_path: Path) -> None:
    counting = Counting(tmp_path, _labels(tag_values=100))
    many = json.dumps({f"t{i}": "v" for i in range(10)})
    counting.observe(
        RowSet(
            exchanges=[
                _row('{"feature":"search","project":"atlas"}', 2 * 10**12),
                _row('{"project":"atlas"}', None),  # unpriced: a request, no cost
                _row("{not json", 10**12),
                _row(None, 10**12),
                _row(many, 10**12),  # more names than the cap
            ]
        )
    )
    requests = _samples(tmp_path, "llmtap_tag_requests")
    assert requests == {("feature", "search"): 1, ("project", "atlas"): 2, (OTHER, OTHER): 10}
    cost = _samples(tmp_path, "llmtap_tag_cost_usd")
    assert cost[("project", "atlas")] == 2 and cost[("feature", "search")] == 2


def test_a_second_counting_in_another_folder_counts_into_its_own(tmp_path: Path) -> None:
    """The library's value class keeps the files of the folder it first wrote to: a later
    observer of the same process (a writer restarted on another run) must not count there."""
    first, second = tmp_path / "first", tmp_path / "second"
    Counting(first, _labels()).observe(RowSet(exchanges=[_row('{"project":"atlas"}', None)]))
    Counting(second, _labels()).observe(RowSet(exchanges=[_row('{"project":"zephyr"}', None)]))
    assert _samples(first, "llmtap_tag_requests") == {("project", "atlas"): 1}
    assert _samples(second, "llmtap_tag_requests") == {("project", "zephyr"): 1}
