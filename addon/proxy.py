"""Run mitmproxy in this process with the recorder: `llmtap proxy`'s engine room.

Regular mode intercepts HTTPS with mitmproxy's CA; reverse listeners (one per provider)
need no CA at all, the client only changes its base URL. On start it prints exactly what
to set in a client and the addresses mitmproxy really listens on; a listener beyond
loopback without `[auth]` gets a warning (anyone who can reach it can bill its teams).
Modes that name no address of their own listen on `listen_host` (127.0.0.1 by default),
not on every interface as mitmproxy would. SIGINT and SIGTERM shut mitmproxy down, which calls the recorder's
`done`, which flushes the writer.

An upstream that is unreachable, refuses, or gives no response headers within
`upstream_timeout` seconds gets the client a 502 or 504 in its protocol's error shape
(addon/answering.py: a reverse listener connects when a request needs it, so that a
failure has a request to answer).

Not responsible for reading settings (the CLI does) or for recording (the recorder).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import math
import signal
import socket
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from mitmproxy import exceptions, options
from mitmproxy.proxy.mode_specs import ProxyMode, RegularMode, ReverseMode, UpstreamMode
from mitmproxy.tools.dump import DumpMaster

from llmtap.addon.attribution import Attribution
from llmtap.addon.chain import recording_addons
from llmtap.addon.recorder import Recorder
from llmtap.storage.private import open_private, private_dir
from llmtap.storage.sink import RecordSink

UPSTREAMS = {
    "anthropic": "https://api.anthropic.com",
    "openai": "https://api.openai.com",
    "gemini": "https://generativelanguage.googleapis.com",
}
ALIASES = {"google": "gemini"}


@dataclass
class ReverseListener:
    provider: str  # anthropic, openai, gemini
    port: int
    upstream: str
    team: str | None = None

    def spec(self, host: str) -> str:
        return f"reverse:{self.upstream}@{host}:{self.port}"


@dataclass
class ProxyPlan:
    listen_host: str = "127.0.0.1"
    regular_port: int | None = 8080
    reverse: list[ReverseListener] = field(default_factory=list)
    extra_modes: list[str] = field(default_factory=list)
    confdir: Path = Path("~/.mitmproxy").expanduser()
    ca_bundle: Path | None = None
    quiet: bool = False
    settings: list[str] = field(default_factory=list)  # mitmproxy `KEY=VALUE` options (`--set`)
    auth: dict[str, str] = field(default_factory=dict, repr=False)  # [auth]: team -> proxy password
    upstream_timeout: float = 600.0  # seconds for an LLM request's response headers (0: none)

    def modes(self) -> list[str]:
        modes = []
        if self.regular_port is not None:
            modes.append(f"regular@{self.listen_host}:{self.regular_port}")
        modes += [listener.spec(self.listen_host) for listener in self.reverse]
        return modes + self.extra_modes


class ProxyOptionError(ValueError):
    """A `--set KEY=VALUE` that mitmproxy would not take, or that `llmtap proxy` owns."""


# Options `llmtap proxy` owns through its own flags.
OWN_OPTIONS = {
    "mode": "--mode/--reverse/--port",
    "confdir": "--confdir",
    "llmtap_upstream_timeout": "--upstream-timeout",
}


def check_settings(specs: list[str]) -> None:
    """Raise ProxyOptionError for a `--set` spec that is not `KEY=VALUE` or that names
    an option this command sets itself. Unknown keys and bad values are caught when
    mitmproxy's options exist (`apply_settings`)."""
    for spec in specs:
        name, eq, _ = spec.partition("=")
        if not eq or not name.strip():
            raise ProxyOptionError(f"--set wants KEY=VALUE (a mitmproxy option), not {spec!r}")
        if name.strip() in OWN_OPTIONS:
            raise ProxyOptionError(f"--set {name.strip()}: use {OWN_OPTIONS[name.strip()]} instead")


def apply_settings(opts: options.Options, specs: list[str]) -> None:
    """Apply `KEY=VALUE` specs the way `mitmdump --set` does, naming the culprit."""
    try:
        opts.set(*(spec.strip() for spec in specs))
    except (exceptions.OptionsError, NotImplementedError) as exc:
        raise ProxyOptionError(f"--set: {exc}") from None
    names = {spec.partition("=")[0].strip() for spec in specs}
    for name, option in opts.items():  # mitmproxy checks `choices` only in its UIs
        value = option.current()
        if name in names and option.choices and isinstance(value, str) and value not in option.choices:
            raise ProxyOptionError(f"--set {name}: one of {', '.join(option.choices)}, not {value!r}")


def check_modes(specs: list[str], listen_host: str = "127.0.0.1") -> None:
    """Raise ValueError with mitmproxy's own words for a bad `--mode` spec, and for two
    listeners given one address (mitmproxy would refuse it only once it starts)."""
    taken: dict[tuple[str, int], str] = {}
    for spec in specs:
        mode = ProxyMode.parse(spec)
        address = (mode.listen_host(listen_host), mode.listen_port() or 0)
        if address[1] and address in taken:
            raise ValueError(f"{taken[address]} and {spec} both listen on {address[0]}:{address[1]}")
        taken[address] = spec


def with_free_ports(plan: ProxyPlan) -> ProxyPlan:
    """`plan` with a free port of its own for each listener given port 0, when there are
    several: mitmproxy takes one address once, and 0 twice is one address to it. The ports
    are reserved together, so they differ, and let go just before mitmproxy binds them."""
    zeros = int(plan.regular_port == 0) + sum(listener.port == 0 for listener in plan.reverse)
    if zeros < 2:
        return plan
    sockets = []
    try:
        for _ in range(zeros):
            held = socket.socket(socket.AF_INET6 if ":" in plan.listen_host else socket.AF_INET)
            held.bind((plan.listen_host, 0))
            sockets.append(held)
        ports = iter([held.getsockname()[1] for held in sockets])
    finally:
        for held in sockets:
            held.close()
    regular = next(ports) if plan.regular_port == 0 else plan.regular_port
    reverse = [replace(listener, port=next(ports)) if listener.port == 0 else listener for listener in plan.reverse]
    return replace(plan, regular_port=regular, reverse=reverse)


# Modes whose clients can send proxy credentials; with [auth] only these and reverse
# listeners may run (a transparent or WireGuard client has no way to authenticate).
AUTH_MODES = (RegularMode, UpstreamMode, ReverseMode)
Listening = dict[str, list[tuple[str, int]]]  # a mode's full spec -> the addresses it listens on


def check_auth_modes(specs: list[str]) -> None:
    """Raise ProxyOptionError for a mode whose clients cannot send [auth] credentials."""
    for spec in specs:
        mode = ProxyMode.parse(spec)
        if not isinstance(mode, AUTH_MODES):
            raise ProxyOptionError(f"[auth] is set, and a {mode.type_name} listener cannot ask for credentials: {spec}")


def planned(plan: ProxyPlan, default_host: str) -> Listening:
    """Where each mode will listen, from its spec (before mitmproxy has bound anything)."""
    out: Listening = {}
    for spec in plan.modes():
        mode = ProxyMode.parse(spec)
        port = mode.listen_port()
        out[mode.full_spec] = [(mode.listen_host(default_host), port)] if port is not None else []
    return out


def exposed(host: str) -> bool:
    """An address reachable from beyond this machine (all interfaces, or not loopback)."""
    if host in ("", "localhost"):
        return host == ""
    try:
        return not ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return True  # a host name: whatever it resolves to, it is not ours to vouch for


def _shown(host: str, port: int) -> str:
    if host in ("", "0.0.0.0", "::"):
        host = host or "*"
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _connectable(host: str) -> str:
    """An address a client on this machine can use for a listener on `host`."""
    return "127.0.0.1" if host in ("", "0.0.0.0", "::", "*") else (f"[{host}]" if ":" in host else host)


def warnings_for(plan: ProxyPlan, listening: Listening) -> list[str]:
    """SPEC §6: a listener beyond loopback is for anyone who can reach it."""
    out = []
    for spec, addresses in listening.items():
        mode = ProxyMode.parse(spec)
        for host, port in addresses:
            if not exposed(host):
                continue
            where = _shown(host, port)
            if not plan.auth:
                out.append(
                    f"llmtap: WARNING: listening on {where}, beyond this machine, without [auth]: anyone "
                    "who can reach it can use it and bill its teams. Add [auth] to the config file, "
                    "or listen on 127.0.0.1."
                )
            elif isinstance(mode, ReverseMode):
                out.append(
                    f"llmtap: WARNING: the reverse listener on {where} is beyond this machine; [auth] does not "
                    "cover reverse listeners (clients send no proxy credentials there): anyone who can reach it "
                    "is billed to its team, or by the key map."
                )
    return out


def client_settings(plan: ProxyPlan, db_label: str, listening: Listening | None = None) -> str:
    """What to tell the user once the listeners are up: where they really listen."""
    listening = listening if listening is not None else planned(plan, plan.listen_host)
    lines = [f"llmtap is recording into {db_label}"]
    ca = plan.confdir / "mitmproxy-ca-cert.pem"
    user = "TEAM:PASSWORD" if plan.auth else "TEAM:x"
    hint = "a team of [auth] and its password" if plan.auth else "TEAM names who is spending"
    for spec, addresses in listening.items():
        if not isinstance(ProxyMode.parse(spec), RegularMode) or not addresses:
            continue
        host, port = addresses[0]
        where = " and ".join(_shown(h, p) for h, p in addresses)
        bundle = plan.ca_bundle or ca
        lines += [
            "",
            f"Regular proxy listening on {where} (HTTPS through mitmproxy's CA). In the client's shell:",
            f"  export HTTPS_PROXY=http://{user}@{_connectable(host)}:{port}   # {hint}",
            f"  export SSL_CERT_FILE={bundle}   # Python SDKs (httpx): system CAs + mitmproxy's",
            f"  export REQUESTS_CA_BUNDLE={bundle}",
            f"  export NODE_EXTRA_CA_CERTS={ca}   # Node: Claude Code, Gemini CLI",
            f"  export CODEX_CA_CERTIFICATE={ca}   # Codex CLI (a native binary: Node's setting does not reach it)",
        ]
    reverse = {
        spec: addresses for spec, addresses in listening.items() if isinstance(ProxyMode.parse(spec), ReverseMode)
    }
    if reverse:
        lines += ["", "Reverse listeners (no CA needed; only the base URL changes):"]
    ports = {listener.port for listener in plan.reverse}
    for spec, addresses in reverse.items():
        if addresses and addresses[0][1] not in ports:
            shown = " and ".join(dict.fromkeys(_shown(*a) for a in addresses))
            lines.append(f"  {ProxyMode.parse(spec).data} listening on {shown}")
    for listener in plan.reverse:
        found = next((a for a in reverse.values() if a and a[0][1] == listener.port), [])
        host = found[0][0] if found else plan.listen_host
        base = f"http://{_connectable(host)}:{listener.port}"
        team = f"   # team {listener.team}" if listener.team else ""
        if found:
            # a reverse listener has a TCP and a UDP socket on one address: name it once
            shown = " and ".join(dict.fromkeys(_shown(*a) for a in found))
            lines.append(f"  {listener.provider} listening on {shown}:")
        if listener.provider == "anthropic":
            lines.append(f"  export ANTHROPIC_BASE_URL={base}{team}")
        elif listener.provider == "openai":
            lines.append(f"  export OPENAI_BASE_URL={base}/v1{team}   # OpenAI SDKs")
            lines.append(f"  codex -c 'openai_base_url=\"{base}/v1\"'   # Codex CLI ignores OPENAI_BASE_URL")
        else:
            lines.append(f"  export GOOGLE_GEMINI_BASE_URL={base}{team}   # google-genai: HttpOptions(base_url=...)")
    lines.append("")
    lines.append("Ctrl-C stops the proxy and writes everything queued.")
    return "\n".join(lines)


class _Announce:
    """Prints the client settings once mitmproxy's listeners are running, with the
    addresses they are bound to, and the warnings for exposed listeners (even when quiet)."""

    def __init__(self, plan: ProxyPlan, db_label: str, master: DumpMaster) -> None:
        self.plan = plan
        self.db_label = db_label
        self.master = master

    def running(self) -> None:
        listening = self._listening()
        for line in warnings_for(self.plan, listening):
            print(line, file=sys.stderr, flush=True)
        if not self.plan.quiet:
            print(client_settings(self.plan, self.db_label, listening), file=sys.stderr, flush=True)

    def _listening(self) -> Listening:
        server = self.master.addons.get("proxyserver")
        out: Listening = {}
        for instance in getattr(server, "servers", []):
            out[instance.mode.full_spec] = [(str(a[0]), int(a[1])) for a in instance.listen_addrs]
        return out or planned(self.plan, self.master.options.listen_host)


def run(plan: ProxyPlan, writer: RecordSink, attribution: Attribution, db_label: str, gate: Any = None) -> int:
    """Run until SIGINT/SIGTERM; returns the exit status. `gate`: the budget gate the CLI
    made (llmtap.telemetry.proxy_side), asked before a request is forwarded; None: none."""
    return asyncio.run(_main(plan, writer, attribution, db_label, gate))


async def _main(plan: ProxyPlan, writer: RecordSink, attribution: Attribution, db_label: str, gate: Any = None) -> int:
    logging.getLogger("llmtap").setLevel(logging.INFO)
    opts = options.Options()
    master = DumpMaster(opts, with_termlog=True, with_dumper=False)
    recorder = Recorder(writer=writer, attribution=attribution)
    master.addons.add(*recording_addons(recorder, attribution, plan.auth, gate), _Announce(plan, db_label, master))
    opts.update(
        mode=plan.modes(),
        listen_host=plan.listen_host,  # a mode with no address of its own: not every interface
        confdir=str(plan.confdir),
        termlog_verbosity="warn",
        llmtap_upstream_timeout=plan.upstream_timeout,
        # mitmproxy closes a connection idle this long: past the upstream timeout, so that a
        # request waiting for its response gets the 504 first
        tcp_timeout=max(600, math.ceil(plan.upstream_timeout) + 60),
    )
    apply_settings(opts, plan.settings)  # after the defaults above, so the user's win
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(_quiet_cancellation)  # mitmproxy's own replaces it while it runs
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, master.shutdown)
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    await master.run()
    # The records are handed over next (the caller closes the writer). Closing the loop would
    # put SIGTERM back to its default, and a repeated one would kill the process mid-hand-over.
    loop.remove_signal_handler(signal.SIGTERM)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    return 0


def _quiet_cancellation(loop: asyncio.AbstractEventLoop, context: dict) -> None:
    """After mitmproxy stops, `asyncio.run` cancels the client connections still open (an
    SDK's keep-alive ones); Python 3.12's stream protocol then reports each cancelled
    handler as an error with a traceback. A cancellation at shutdown is not an error."""
    if isinstance(context.get("exception"), asyncio.CancelledError):
        return
    loop.default_exception_handler(context)


def prepare_ca(confdir: Path, bundle: Path) -> Path:
    """Create mitmproxy's CA now (it would on first start) and a bundle of the system's
    CAs plus it: `SSL_CERT_FILE` replaces a client's bundle rather than adding to it."""
    import certifi
    from mitmproxy import certs

    certs.CertStore.from_store(str(confdir), "mitmproxy", 2048)
    ca = (confdir / "mitmproxy-ca-cert.pem").read_bytes()
    private_dir(bundle.parent)
    with open_private(bundle, "wb") as handle:  # a file of llmtap's home: private like the rest
        handle.write(Path(certifi.where()).read_bytes().rstrip(b"\n") + b"\n" + ca)
    return bundle
