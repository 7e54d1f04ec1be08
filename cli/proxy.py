"""`llmtap proxy`: run mitmproxy with the recorder (SPEC §3).

Options come from flags, then the environment (`LLMTAP_LISTEN_HOST`, `LLMTAP_PORT`,
`LLMTAP_REVERSE="anthropic=8081;openai=8082,search"`), then the config file's `[proxy]`
table, then defaults: a regular proxy on 127.0.0.1:8080 and no reverse listeners.

    [proxy]                          # its model: ProxySection, cli/config_schema.py
    listen_host = "127.0.0.1"
    port = 8080                      # the regular (HTTPS-intercepting) proxy; false: none
    confdir = "~/.mitmproxy"         # mitmproxy's folder with its CA
    modes = []                       # mitmproxy mode specs, after --mode's
    upstream_timeout = 600           # seconds an LLM request waits for response headers: then a 504
    access_log = false               # a line on stderr per finished exchange (--access-log)
    [[proxy.reverse]]
    provider = "anthropic"           # anthropic | openai | gemini
    port = 8081
    team = "search"                  # optional: this listener's traffic belongs to it
    upstream = "https://api.anthropic.com"   # optional

With `[auth]` in the config file (team -> proxy password) the proxy refuses (407) any
proxy request without a team's right credentials, and the X-LLMTap-Team header names no
one; reverse listeners take no proxy credentials (see addon/auth.py), and transparent,
SOCKS or WireGuard modes are refused. Traffic is priced only when it went to a provider's
API host (protocols/hosts.py), a host of the config's `[[providers]]` (protocols/providers.py)
or an upstream configured here.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from llmtap.cli import settings as settings_module
from llmtap.cli.errors import UsageError


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "proxy",
        help="run the recording proxy (mitmproxy with the llmtap addon)",
        description="Record LLM traffic: a regular proxy (HTTPS via mitmproxy's CA) and/or "
        "reverse listeners per provider. Prints what to set in the client.",
    )
    parser.add_argument("--listen-host", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, help="regular proxy port (default 8080)")
    parser.add_argument("--no-regular", action="store_true", help="no regular proxy, reverse listeners only")
    parser.add_argument(
        "--reverse",
        action="append",
        default=[],
        metavar="NAME=PORT[,TEAM]",
        help="reverse listener for anthropic, openai or gemini; repeat for each",
    )
    parser.add_argument(
        "--upstream",
        action="append",
        default=[],
        metavar="NAME=URL",
        help="where a reverse listener forwards to (default the provider's API)",
    )
    parser.add_argument("--mode", action="append", default=[], metavar="SPEC", help="a mitmproxy mode spec; repeats")
    parser.add_argument("--bodies", choices=("none", "metadata", "full"), help="what to keep of bodies")
    parser.add_argument("--confdir", help="mitmproxy's folder with its CA (default ~/.mitmproxy)")
    parser.add_argument("--quiet", action="store_true", help="do not print client settings")
    parser.add_argument(
        "--upstream-timeout",
        type=_seconds,
        metavar="SECONDS",
        help="how long an LLM request waits for the upstream's response headers before its client "
        "gets a 504 (default 600; 0: no limit)",
    )
    parser.add_argument(
        "--access-log",
        action="store_true",
        default=None,
        help="print a line per finished exchange: time, team, request, status, model, tokens, cost, duration",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        dest="settings",
        help="a mitmproxy option, as mitmdump --set takes it (e.g. ssl_insecure=true); repeats",
    )
    parser.add_argument(
        "--metrics", metavar="HOST:PORT", help="serve Prometheus metrics at http://HOST:PORT/metrics ([metrics])"
    )
    parser.add_argument(
        "--otlp-endpoint", metavar="URL", help="send one OpenTelemetry span per exchange over OTLP/HTTP ([otlp])"
    )
    settings_module.add_common(parser)
    parser.set_defaults(run=run)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds (0 for no limit), not {text!r}")
    return value


def _reverse(entries: list[str], upstreams: dict[str, str], config: list[Any]) -> list[Any]:
    """The listeners of `--reverse` (or LLMTAP_REVERSE) and of `[[proxy.reverse]]`."""
    from llmtap.addon.proxy import ALIASES, UPSTREAMS, ReverseListener

    listeners = []
    for entry in config:
        entries = [*entries, f"{entry.provider}={entry.port}" + (f",{entry.team}" if entry.team else "")]
        if entry.upstream:
            # named as the listener's entry below names it, or its upstream goes unused
            provider = entry.provider.strip().lower()
            upstreams.setdefault(ALIASES.get(provider, provider), entry.upstream)
    for entry in entries:
        name, _, rest = entry.partition("=")
        name = ALIASES.get(name.strip().lower(), name.strip().lower())
        port_text, _, team = rest.partition(",")
        if name not in UPSTREAMS or not port_text.strip().isdigit():
            raise UsageError(f"--reverse wants NAME=PORT[,TEAM] with NAME one of anthropic, openai, gemini: {entry!r}")
        upstream = upstreams.get(name, UPSTREAMS[name])
        listeners.append(ReverseListener(name, int(port_text), upstream, team.strip() or None))
    return listeners


def _upstreams(entries: list[str]) -> dict[str, str]:
    from llmtap.addon.proxy import ALIASES

    out = {}
    for entry in entries:
        name, _, url = entry.partition("=")
        if not url.startswith(("http://", "https://")):
            raise UsageError(f"--upstream wants NAME=URL: {entry!r}")
        out[ALIASES.get(name.strip().lower(), name.strip().lower())] = url.rstrip("/")
    return out


def plan_from(args: argparse.Namespace, settings: Any) -> Any:
    from llmtap.addon.proxy import (
        ProxyOptionError,
        ProxyPlan,
        check_auth_modes,
        check_modes,
        check_settings,
        with_free_ports,
    )

    section = settings.config.proxy
    env_reverse = [e for e in os.environ.get("LLMTAP_REVERSE", "").split(";") if e.strip()]
    port = settings.sources.pick(("proxy", "port"), flag="port")
    port = _int(port) if isinstance(port, str) else port  # LLMTAP_PORT
    if (
        args.no_regular
        or port is False
        or ((args.reverse or args.mode) and args.port is None and "port" not in section.model_fields_set)
    ):
        port = None
    plan = ProxyPlan(
        listen_host=settings.sources.pick(("proxy", "listen_host"), flag="listen_host"),
        regular_port=port,
        reverse=_reverse(args.reverse or env_reverse, _upstreams(args.upstream), section.reverse),
        extra_modes=list(args.mode) + section.modes,
        confdir=Path(args.confdir or section.confdir).expanduser(),
        quiet=args.quiet,
        settings=list(args.settings),
        auth=dict(settings.auth),
        upstream_timeout=float(settings.sources.pick(("proxy", "upstream_timeout"), flag="upstream_timeout")),
    )
    try:
        check_settings(plan.settings)
    except ProxyOptionError as exc:
        raise UsageError(str(exc)) from None
    try:
        plan = with_free_ports(plan)
        check_modes(plan.modes(), plan.listen_host)
    except OSError as exc:
        raise UsageError(f"cannot find free ports on {plan.listen_host}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise UsageError(f"bad proxy mode: {exc}") from None
    if plan.auth:
        try:
            check_auth_modes(plan.modes())
        except ProxyOptionError as exc:
            raise UsageError(str(exc)) from None
    if not plan.modes():
        raise UsageError("nothing to listen on: give --port, --reverse or --mode")
    return plan


def _host_port(url: str) -> tuple[str, int]:
    """A configured upstream as the addon compares it with a request's host and port."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    return (parts.hostname or "").lower(), port or (443 if parts.scheme == "https" else 80)


def _int(value: str | None) -> int | None:
    if value is None or not value.strip():
        return None
    if not value.strip().isdigit():
        raise UsageError(f"LLMTAP_PORT must be a port number, not {value!r}")
    return int(value)


def run(args: argparse.Namespace) -> int:
    settings = settings_module.load(args)  # a bad config file is refused before mitmproxy is imported

    from llmtap.addon.proxy import ProxyOptionError, prepare_ca
    from llmtap.addon.proxy import run as run_proxy
    from llmtap.cli import recording
    from llmtap.cli.store import open_store
    from llmtap.storage.engine import home
    from llmtap.storage.store_secret import fingerprinter_for

    plan = plan_from(args, settings)
    engine = open_store(settings)
    fingerprinter = fingerprinter_for(engine, settings.secret_file, by="proxy")  # the store's, or refused
    url = engine.url.render_as_string(hide_password=False)
    telemetry = recording.telemetry_for(settings, url, metrics_flag=args.metrics, otlp_flag=args.otlp_endpoint)
    plan.ca_bundle = prepare_ca(plan.confdir, home() / "ca-bundle.pem")
    listeners = recording.Listeners(
        teams={listener.port: listener.team for listener in plan.reverse if listener.team},
        tags={entry.port: entry.tags for entry in settings.config.proxy.reverse if entry.tags},
        providers={
            listener.port: "google" if listener.provider == "gemini" else listener.provider for listener in plan.reverse
        },
        trusted_upstreams=frozenset(_host_port(listener.upstream) for listener in plan.reverse),
    )
    access = bool(settings.sources.pick(("proxy", "access_log"), flag="access_log"))
    opened = recording.start(settings, url, telemetry, listeners, fingerprinter, access_log=access, say_left=False)
    label = engine.url.render_as_string(hide_password=True)
    ran = False
    try:
        status = run_proxy(
            plan, opened.writer, opened.attribution, f"{label} (bodies: {settings.body_mode})", gate=opened.gate
        )
        ran = True
        return status
    except ProxyOptionError as exc:
        raise UsageError(str(exc)) from None
    finally:
        recording.close_writer(opened.writer)
        opened.close()
        if ran:
            opened.say_left()
