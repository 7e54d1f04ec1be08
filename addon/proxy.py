"""Run mitmproxy in this process with the recorder: `llmtap proxy`'s engine room.

Regular mode intercepts HTTPS with mitmproxy's CA; reverse listeners (one per provider)
need no CA at all, the client only changes its base URL. On start it prints exactly what
to set in a client. SIGINT and SIGTERM shut mitmproxy down, which calls the recorder's
`done`, which flushes the writer.

Not responsible for reading settings (the CLI does) or for recording (the recorder).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

from mitmproxy import exceptions, options
from mitmproxy.proxy.mode_specs import ProxyMode, RegularMode, ReverseMode
from mitmproxy.tools.dump import DumpMaster

from llmtap.addon.attribution import Attribution
from llmtap.addon.recorder import Recorder
from llmtap.storage.writer import Writer
from llmtap.storage.writer_process import WriterProcess

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

    def modes(self) -> list[str]:
        modes = []
        if self.regular_port is not None:
            modes.append(f"regular@{self.listen_host}:{self.regular_port}")
        modes += [listener.spec(self.listen_host) for listener in self.reverse]
        return modes + self.extra_modes


class ProxyOptionError(ValueError):
    """A `--set KEY=VALUE` that mitmproxy would not take, or that `llmtap proxy` owns."""


# Options `llmtap proxy` owns through its own flags.
OWN_OPTIONS = {"mode": "--mode/--reverse/--port", "confdir": "--confdir"}


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


def check_modes(specs: list[str]) -> None:
    """Raise ValueError with mitmproxy's own words for a bad `--mode` spec."""
    for spec in specs:
        ProxyMode.parse(spec)


def client_settings(plan: ProxyPlan, db_label: str) -> str:
    """What to tell the user once the listeners are up."""
    lines = [f"llmtap is recording into {db_label}"]
    ca = plan.confdir / "mitmproxy-ca-cert.pem"
    host = plan.listen_host if plan.listen_host not in ("0.0.0.0", "::", "") else "127.0.0.1"
    regular = [m for m in plan.modes() if isinstance(ProxyMode.parse(m), RegularMode)]
    for spec in regular:
        port = ProxyMode.parse(spec).listen_port()
        bundle = plan.ca_bundle or ca
        lines += [
            "",
            f"Regular proxy on {host}:{port} (HTTPS through mitmproxy's CA). In the client's shell:",
            f"  export HTTPS_PROXY=http://TEAM:x@{host}:{port}   # TEAM names who is spending",
            f"  export SSL_CERT_FILE={bundle}   # Python SDKs (httpx): system CAs + mitmproxy's",
            f"  export REQUESTS_CA_BUNDLE={bundle}",
            f"  export NODE_EXTRA_CA_CERTS={ca}   # Node: Claude Code, Codex CLI, Gemini CLI",
        ]
    reverse = [ProxyMode.parse(m) for m in plan.modes() if isinstance(ProxyMode.parse(m), ReverseMode)]
    if reverse:
        lines += ["", "Reverse listeners (no CA needed; only the base URL changes):"]
    for listener in plan.reverse:
        base = f"http://{host}:{listener.port}"
        team = f"   # team {listener.team}" if listener.team else ""
        if listener.provider == "anthropic":
            lines.append(f"  export ANTHROPIC_BASE_URL={base}{team}")
        elif listener.provider == "openai":
            lines.append(f"  export OPENAI_BASE_URL={base}/v1{team}")
        else:
            lines.append(f"  export GOOGLE_GEMINI_BASE_URL={base}{team}   # google-genai: HttpOptions(base_url=...)")
    lines.append("")
    lines.append("Ctrl-C stops the proxy and writes everything queued.")
    return "\n".join(lines)


class _Announce:
    """Prints the client settings once mitmproxy's listeners are running."""

    def __init__(self, text: str, quiet: bool) -> None:
        self.text = text
        self.quiet = quiet

    def running(self) -> None:
        if not self.quiet:
            print(self.text, file=sys.stderr, flush=True)


def run(plan: ProxyPlan, writer: Writer | WriterProcess, attribution: Attribution, db_label: str) -> int:
    """Run until SIGINT/SIGTERM; returns the exit status."""
    return asyncio.run(_main(plan, writer, attribution, db_label))


async def _main(plan: ProxyPlan, writer: Writer | WriterProcess, attribution: Attribution, db_label: str) -> int:
    logging.getLogger("llmtap").setLevel(logging.INFO)
    opts = options.Options()
    master = DumpMaster(opts, with_termlog=True, with_dumper=False)
    recorder = Recorder(writer=writer, attribution=attribution)
    master.addons.add(recorder, _Announce(client_settings(plan, db_label), plan.quiet))
    opts.update(
        mode=plan.modes(),
        confdir=str(plan.confdir),
        termlog_verbosity="warn",
    )
    apply_settings(opts, plan.settings)  # after the defaults above, so the user's win
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(_quiet_cancellation)  # mitmproxy's own replaces it while it runs
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, master.shutdown)
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    await master.run()
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
    bundle.parent.mkdir(parents=True, exist_ok=True)
    bundle.write_bytes(Path(certifi.where()).read_bytes().rstrip(b"\n") + b"\n" + ca)
    return bundle
