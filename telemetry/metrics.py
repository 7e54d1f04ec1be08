"""Prometheus metrics (`--metrics HOST:PORT`, `[metrics]`): the settings, and the two
entry points, the counting observer of the writer's process (`observer`) and the
endpoint of the proxy's process (`start_in_proxy`).

The two processes share one folder of prometheus-client multiprocess files per proxy
run, `<spool dir>/metrics/<pid>-<token>`: named when the settings are read (in the proxy's
process, before the writer's starts), removed when the proxy stops; a folder a crashed
run left is removed at the next start once its process is gone.

```toml
[metrics]
listen = "127.0.0.1:9464"   # --metrics wins over it
teams = 200                 # distinct team labels, then `other`
models = 200                # distinct priced models, then `other`
unpriced_models = 50        # distinct models the price catalogue does not know, then `other`
series = 10000              # distinct (team, provider, model) triples, then `other`
tags = 20                   # distinct tag names (llmtap_tag_* counters), then `other`
tag_values = 1000           # distinct (tag, value) pairs, then the tag's `other`
```

The endpoint admits requests as the dashboard server does (SPEC §6, storage/access.py):
only a `Host` that names its address, and a token off loopback or when the store is
private to its user: `LLMTAP_METRICS_TOKEN`, else one made per run and printed.

Not responsible for counting (metrics_count.py), bounding labels (metrics_labels.py), any
verdict (the writer stores them, storage/verdicts.py) or serving (metrics_serve.py).
"""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import AfterValidator

from llmtap.config.section import Positive, Section, parse

if TYPE_CHECKING:
    from llmtap.storage.writer import Observer
    from llmtap.telemetry.metrics_serve import Serving
    from llmtap.telemetry.settings import Telemetry

log = logging.getLogger("llmtap.telemetry")
CAPS = {"teams": 200, "models": 200, "unpriced_models": 50, "series": 10_000, "tags": 20, "tag_values": 1000}


@dataclass(frozen=True)
class MetricsSettings:
    host: str
    port: int
    run: str  # this run's folder name under <spool dir>/metrics
    teams: int = CAPS["teams"]
    models: int = CAPS["models"]
    unpriced_models: int = CAPS["unpriced_models"]
    series: int = CAPS["series"]
    tags: int = CAPS["tags"]
    tag_values: int = CAPS["tag_values"]
    providers: tuple[str, ...] = ()  # the config's [[providers]] names: labels beside genai-prices' ids


def _listen(value: str) -> str:
    _address(value)
    return value


class MetricsSection(Section):
    """`[metrics]` as the config file has it."""

    listen: Annotated[str | None, AfterValidator(_listen)] = None
    teams: Positive = CAPS["teams"]
    models: Positive = CAPS["models"]
    unpriced_models: Positive = CAPS["unpriced_models"]
    series: Positive = CAPS["series"]
    tags: Positive = CAPS["tags"]
    tag_values: Positive = CAPS["tag_values"]


def settings_from(
    flag: str | None, section: MetricsSection | Mapping[str, Any] | None, providers: tuple[str, ...] = ()
) -> MetricsSettings | None:
    """None when metrics are off. Raises ValueError naming the bad value. `providers`: the
    names the config's `[[providers]]` give, provider labels as genai-prices' ids are."""
    if flag is None and section is None:
        return None
    table = parse(MetricsSection, section if section is not None else {}, ("metrics",))
    if flag is not None:
        try:
            host, port = _address(flag)
        except ValueError as exc:
            raise ValueError(f"--metrics {exc}") from None
    elif table.listen is None:
        raise ValueError('[metrics] needs listen = "HOST:PORT" (or --metrics HOST:PORT)')
    else:
        host, port = _address(table.listen)
    caps = {name: getattr(table, name) for name in CAPS}
    run = f"{os.getpid()}-{secrets.token_hex(4)}"
    return MetricsSettings(host=host, port=port, run=run, providers=tuple(providers), **caps)


def _address(value: str) -> tuple[str, int]:
    text = value.strip()
    host, sep, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"must be HOST:PORT (e.g. 127.0.0.1:9464), not {value!r}")
    return host, int(port)


def folder(telemetry: Telemetry) -> Path:
    assert telemetry.metrics is not None
    return Path(telemetry.spool_dir) / "metrics" / telemetry.metrics.run


def observer(telemetry: Telemetry) -> Observer:
    """The counting observer, made in the writer's process."""
    from llmtap.telemetry.metrics_count import Counting
    from llmtap.telemetry.metrics_labels import Labels

    settings = telemetry.metrics
    assert settings is not None
    labels = Labels(
        teams=settings.teams,
        models=settings.models,
        unpriced_models=settings.unpriced_models,
        series=settings.series,
        providers=settings.providers,
        tags=settings.tags,
        tag_values=settings.tag_values,
    )
    try:
        return Counting(folder(telemetry), labels)
    except Exception as exc:  # noqa: BLE001 - metrics never cost a record: the writer must open
        log.error("llmtap metrics: cannot count in %s (%s); /metrics will show no exchanges", folder(telemetry), exc)
        return _Silent()


class _Silent:
    """The observer when counting could not start: it takes every batch and does nothing."""

    def observe(self, rows: Any) -> None:
        pass

    def close(self) -> None:
        pass


TOKEN_VARIABLE = "LLMTAP_METRICS_TOKEN"  # the scrape token; else one is made per run (when needed)


def start_in_proxy(telemetry: Telemetry, writer: Any) -> Serving:
    """Serve `/metrics` on a thread (`.stop` stops it), admitting requests as the
    dashboard server does (storage/access.py). Raises OSError (one line) when the address
    is taken or cannot be had."""
    from llmtap.storage.access import store_is_private
    from llmtap.telemetry.metrics_serve import serve

    settings = telemetry.metrics
    assert settings is not None
    try:
        return serve(
            folder(telemetry),
            settings.host,
            settings.port,
            writer,
            token=os.environ.get(TOKEN_VARIABLE) or None,
            private=store_is_private(telemetry.db_url),
        )
    except OSError as exc:
        raise OSError(f"cannot serve metrics at {settings.host}:{settings.port}: {exc.strerror or exc}") from None


def notices(serving: Serving) -> list[str]:
    """What the proxy prints about the endpoint: where to scrape it (with the token when
    one was made for this run), and a warning when it is reachable beyond this machine."""
    rules = serving.admission
    given = bool(os.environ.get(TOKEN_VARIABLE))
    if rules.token is None:
        lines = [f"llmtap: metrics at {serving.url}"]
    elif given:
        lines = [f"llmtap: metrics at {serving.url.split('?')[0]} (the token of {TOKEN_VARIABLE}, as a bearer)"]
    else:
        lines = [
            f"llmtap: metrics at {serving.url} (a token made for this run: Prometheus sends it as "
            "`authorization: {credentials: TOKEN}` or `params: {token: [TOKEN]}`; "
            f"set {TOKEN_VARIABLE} to keep one)"
        ]
    if rules.any_address:
        lines.append(
            f"llmtap: WARNING: metrics on {serving.host}:{rules.port} are reachable beyond this machine: "
            "anyone who can reach them and has the token reads every team's and model's counts."
        )
    return lines
