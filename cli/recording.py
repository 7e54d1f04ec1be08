"""What a recording proxy runs beside mitmproxy, opened from the settings: the writer's
process (pricing each row, and the observers `[metrics]`, `[otlp]` and `[budgets]` ask
for), the proxy's own side of them (`/metrics`, the budget gate) and the attribution maps
(`[teams]`, `[auth]`, the listeners' teams, `[[providers]]`). `llmtap proxy` and the mitmdump script
(cli/mitmdump_script.py) both open it here, so both honour the same config the same way.

Not responsible for mitmproxy (addon/proxy.py, addon/script.py) or for reading settings.
"""

from __future__ import annotations

import functools
import signal
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from llmtap.cli.errors import UsageError
from llmtap.cli.settings import Settings

if TYPE_CHECKING:
    from llmtap.storage.sink import RecordSink
    from llmtap.storage.writer_process import WriterProcess


@dataclass(frozen=True)
class Listeners:
    """What the proxy's reverse listeners tell attribution, by listen port."""

    teams: Mapping[int, str] = field(default_factory=dict)
    tags: Mapping[int, Mapping[str, str]] = field(default_factory=dict)  # [[proxy.reverse]] tags
    providers: Mapping[int, str] = field(default_factory=dict)
    trusted_upstreams: frozenset[tuple[str, int]] = frozenset()  # (host, port) billed like a provider's


@dataclass
class Recording:
    writer: WriterProcess
    attribution: Any  # addon.attribution.Attribution
    side: Any  # telemetry.proxy_side.ProxySide
    auth: Mapping[str, str] = field(repr=False)  # [auth]: team -> proxy password

    @property
    def gate(self) -> Any:
        return self.side.gate

    def close(self) -> None:
        """The proxy's side; the writer is closed by whoever ran it (close_writer)."""
        self.side.close()

    def say_left(self) -> None:
        """The proxy's last line, once the writer is closed: written, in the spool, rejected,
        lost (storage/left_behind.py)."""
        from llmtap.storage.left_behind import line

        writer = self.writer
        print(line(writer.stats, writer.spec.spool_dir, not_handed=writer.backlog), file=sys.stderr, flush=True)


def telemetry_for(
    settings: Settings, url: str, *, metrics_flag: str | None = None, otlp_flag: str | None = None
) -> Any:
    """The telemetry the config's tables and the flags ask for, or a usage error."""
    from llmtap.telemetry.settings import from_config

    try:
        return from_config(
            db_url=url,
            spool_dir=settings.spool_dir,
            metrics_table=settings.config.metrics,
            otlp_table=settings.config.otlp,
            budgets_table=settings.config.budgets,
            metrics_flag=metrics_flag,
            otlp_flag=otlp_flag,
            providers=tuple(entry.name for entry in settings.config.providers),
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def start(
    settings: Settings,
    url: str,
    telemetry: Any,
    listeners: Listeners,
    fingerprinter: Any,
    *,
    access_log: bool = False,
    say_left: bool = True,
) -> Recording:
    """The writer's process started, the proxy's side up, the attribution made.
    `fingerprinter`: the store's (storage.store_secret.fingerprinter_for). `access_log`:
    a line per exchange (storage/access_log.py); `say_left=False`: the caller says what
    is left when the writer closes (`say_left` below), not the writer."""
    from llmtap.addon.attribution import Attribution
    from llmtap.analytics.pricing import row_pricer
    from llmtap.cli.pricing import pricer_for, provider_prices
    from llmtap.storage.engine import make_engine
    from llmtap.storage.writer_process import WriterProcess, WriterSpec
    from llmtap.telemetry import observers, proxy_side

    # a bad price file is a usage error now, not in the writer's process; the budget gate
    # prices its estimates with it, else with the store's, as the writer prices
    engine = make_engine(url)
    try:
        pricer = pricer_for(settings, engine)
    finally:
        engine.dispose()
    writer = WriterProcess(
        WriterSpec(
            url=url,
            spool_dir=settings.spool_dir,
            body_mode=settings.body_mode,
            enrich_factory=functools.partial(row_pricer, settings.price_file, url, provider_prices(settings)),
            observers_factory=functools.partial(observers.build, telemetry) if telemetry.any else None,
            key_secret_id=fingerprinter.secret_id,
            access_log=access_log,
            say_left=say_left,
        )
    )
    try:
        side = proxy_side.start(telemetry, writer, pricer)
    except OSError as exc:  # the metrics address is taken
        close_writer(writer)
        raise UsageError(str(exc)) from None
    for line in side.notices:  # even when quiet: a token made for this run, an exposed endpoint
        print(line, file=sys.stderr, flush=True)
    attribution = Attribution(
        fingerprinter=fingerprinter,
        key_teams=settings.key_teams,
        listener_teams=dict(listeners.teams),
        listener_tags=dict(listeners.tags),
        key_tags=settings.key_tags,
        listener_providers=dict(listeners.providers),
        credentials=dict(settings.auth) or None,
        trusted_upstreams=listeners.trusted_upstreams,
        providers=settings.provider_names(),  # [[providers]]: named, and billed, as configured
    )
    return Recording(writer=writer, attribution=attribution, side=side, auth=dict(settings.auth))


def close_writer(writer: RecordSink) -> None:
    """Hand everything over to the writer. The event loop that handled the first SIGTERM is
    gone by now, so a second one (a service manager or script repeating its stop) would
    kill the process mid-hand-over with status -15; the manager's SIGKILL still ends a
    close that hangs, and Ctrl-C still interrupts it. After a proxy run SIGTERM stays
    ignored until the exit (the proxy set it so); after a failed start it is restored."""
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        writer.close()
    finally:
        signal.signal(signal.SIGTERM, previous)
