"""The coding-agent CLIs, installed from npm at pinned versions into a cache folder, and
one session that runs each of them once through one `llmtap proxy`.

The session: a scripted upstream per route (Anthropic, Bedrock, Vertex, OpenAI, Gemini),
one proxy with a listener per route (reverse listeners for the three providers, mitmproxy
`reverse:` modes for the Bedrock and Vertex gateways) and a regular listener (each CLI
once more through HTTPS_PROXY, trusting mitmproxy's CA, to a TLS upstream of its own on
https://localhost), its own SQLite file, LLMTAP_HOME and mitmproxy confdir; then every
CLI at once, each with a one-tool task in its own HOME (and CODEX_HOME) and its own API
key; then SIGTERM (the proxy writes everything queued) and the `llmtap` commands a user
would run: export, report, show. Runs of one reverse listener share its upstream, which
tells them apart by their keys (and refuses the WebSocket upgrade to one of the two Codex
runs). Every subprocess has a hard timeout.

Not responsible for assertions (test_agents.py) nor for what the upstream answers
(scripts.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import ssl
import subprocess
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import select, update

from llmtap.storage import verdicts
from llmtap.storage.engine import make_engine
from llmtap.storage.schema import exchanges
from llmtap.storage.secrets import KeyFingerprinter
from tests.e2e import harness
from tests.e2e.agents import gemini, responses, scripts
from tests.e2e.agents.upstream import Answer, Request, ScriptedUpstream
from tests.helpers import free_port

PINS = {
    "@anthropic-ai/claude-code": "2.1.332",
    "@openai/codex": "0.171.0",
    "@google/gemini-cli": "0.61.0",
}
# Install scripts stay on: Claude Code's postinstall puts its native binary in place.
NPM_FLAGS = ["--no-audit", "--no-fund", "--loglevel=error"]
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "llmtap-test-agents"
TASK = "Run `echo hi` in the shell and tell me what it printed."
CLI_TIMEOUT = 90.0  # seconds for one agent's whole task (the slowest, Gemini CLI, takes ~12)
COMMAND_TIMEOUT = 60.0  # seconds for one llmtap command
PAUSE = timedelta(minutes=10)  # a pause past the prompt cache's 5-minute TTL


class AgentsUnavailable(Exception):
    """npm, or its registry, cannot be reached: the suite skips with this one line."""


def install() -> Path:
    """The folder whose node_modules/.bin holds the pinned CLIs; installed once per set of
    pins (the folder's name is their hash), into a temporary folder renamed into place."""
    key = hashlib.sha256(json.dumps([PINS, NPM_FLAGS], sort_keys=True).encode()).hexdigest()[:12]
    target = CACHE / key
    if all((target / "node_modules" / ".bin" / name).exists() for name in ("claude", "codex", "gemini")):
        return target
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        raise AgentsUnavailable("npm/node are not installed")
    CACHE.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="install-", dir=CACHE))
    packages = [f"{name}@{version}" for name, version in PINS.items()]
    done = subprocess.run(
        [npm, "install", "--prefix", str(staging), *NPM_FLAGS, *packages],
        capture_output=True, text=True, timeout=300, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    if done.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        ping = subprocess.run([npm, "ping"], capture_output=True, timeout=60, check=False)
        if ping.returncode != 0:
            raise AgentsUnavailable("the npm registry is unreachable")
        raise RuntimeError(f"npm install failed ({done.returncode}):\n{done.stderr[-3000:]}")
    try:
        staging.rename(target)
    except OSError:  # another process installed it meanwhile
        shutil.rmtree(staging, ignore_errors=True)
    return target


# -- the agents --------------------------------------------------------------------------------


@dataclass
class Agent:
    """How one client is pointed at a proxy listener: the route it speaks, the client's
    environment and command line."""

    name: str
    route: str  # anthropic | bedrock | vertex | openai | gemini: its listener and upstream
    env: Callable[[str, Path, str], dict[str, str]]  # (proxy base, home, key) -> environment
    command: Callable[[Path, str], list[str]]  # (bin folder, proxy base) -> argv
    key_prefix: str | None  # None: the client sends no key (Bedrock/Vertex gateway mode)
    websocket: bool = True  # the upstream accepts its WebSocket upgrade
    # Through the regular proxy instead (HTTPS_PROXY, to its own TLS upstream): the
    # variable that makes the client trust mitmproxy's CA, and the file it names.
    ca: tuple[str, str] | None = None
    script: Callable[[], Any] | None = None  # its upstream's answers, if not its route's
    # A real miss by a pause, without waiting for it: once the proxy has written the run,
    # its exchanges before its last generation are moved back this far in the store (see
    # `_pause`), and its script reads nothing from cache for that follow-up.
    pause: timedelta | None = None

    @property
    def regular(self) -> bool:
        return self.ca is not None

    @property
    def upstream(self) -> str:
        """The upstream (and listener) it goes to: its route, or its own over TLS."""
        return self.name if self.regular else self.route

    def base_env(self, home: Path, bin_dir: Path) -> dict[str, str]:
        path = f"{bin_dir}:{Path(shutil.which('node') or '/usr/bin/node').parent}:/usr/local/bin:/usr/bin:/bin"
        return {"PATH": path, "HOME": str(home), "TERM": "dumb", "LANG": "C.UTF-8", "TMPDIR": str(home / "tmp")}


def _claude(bin_dir: Path, base: str) -> list[str]:
    return [str(bin_dir / "claude"), "-p", TASK, "--allowedTools", "Bash"]


def _codex(bin_dir: Path, base: str) -> list[str]:
    # Codex ignores OPENAI_BASE_URL; its config key `openai_base_url` names the endpoint.
    return [
        str(bin_dir / "codex"), "exec", "-c", f'openai_base_url="{base}/v1"',
        "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", TASK,
    ]  # fmt: skip


def _gemini(bin_dir: Path, base: str) -> list[str]:
    return [str(bin_dir / "gemini"), "-p", TASK, "--yolo"]


NODE_CA = ("NODE_EXTRA_CA_CERTS", "mitmproxy/mitmproxy-ca-cert.pem")  # the session root's files
BUNDLE = "llmtap-home/ca-bundle.pem"
QUIET_CLAUDE = {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1"}


def _codex_env(base: str, home: Path, key: str) -> dict[str, str]:
    codex_home = home / "codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    return {"CODEX_HOME": str(codex_home), "CODEX_API_KEY": key}


def _gemini_env(base: str, home: Path, key: str) -> dict[str, str]:
    settings = {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
    }
    (home / ".gemini").mkdir(parents=True, exist_ok=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
    return {"GOOGLE_GEMINI_BASE_URL": base, "GEMINI_API_KEY": key, "GEMINI_CLI_TRUST_WORKSPACE": "true"}


def _claude_env(base: str, home: Path, key: str) -> dict[str, str]:
    return {"ANTHROPIC_BASE_URL": base, "ANTHROPIC_API_KEY": key, **QUIET_CLAUDE}


def _bedrock_env(base: str, home: Path, key: str) -> dict[str, str]:
    return {
        "CLAUDE_CODE_USE_BEDROCK": "1", "ANTHROPIC_BEDROCK_BASE_URL": base,
        "CLAUDE_CODE_SKIP_BEDROCK_AUTH": "1", "AWS_REGION": "us-east-1", **QUIET_CLAUDE,
    }  # fmt: skip


def _vertex_env(base: str, home: Path, key: str) -> dict[str, str]:
    return {
        "CLAUDE_CODE_USE_VERTEX": "1", "ANTHROPIC_VERTEX_BASE_URL": f"{base}/v1",
        "CLAUDE_CODE_SKIP_VERTEX_AUTH": "1", "CLOUD_ML_REGION": "us-east5",
        "ANTHROPIC_VERTEX_PROJECT_ID": "e2e-project", **QUIET_CLAUDE,
    }  # fmt: skip


AGENTS = {
    agent.name: agent
    for agent in (
        Agent("claude", "anthropic", _claude_env, _claude, harness.ANTHROPIC_KEY),
        Agent("claude-bedrock", "bedrock", _bedrock_env, _claude, None),
        Agent("claude-vertex", "vertex", _vertex_env, _claude, None),
        # Claude Code again, its follow-up reading nothing from the cache: the one miss to list.
        Agent(
            "claude-cache-miss",
            "anthropic",
            _claude_env,
            _claude,
            harness.ANTHROPIC_KEY,
            script=lambda: scripts.AnthropicScript(cache_hits=False),
        ),
        Agent("codex-websocket", "openai", _codex_env, _codex, harness.OPENAI_KEY),
        Agent("codex-sse", "openai", _codex_env, _codex, harness.OPENAI_KEY, websocket=False),
        # Codex again, its follow-up 10 minutes after the turn before it (past the cache's
        # 5-minute TTL) reading nothing: over WebSocket it chains with previous_response_id
        # and sends only the tool's output; over HTTP it sends the whole history.
        *(
            Agent(
                f"codex-{mode}-pause",
                "openai",
                _codex_env,
                _codex,
                harness.OPENAI_KEY,
                websocket=mode == "websocket",
                script=lambda: responses.ResponsesScript(cache_hits=False),
                pause=PAUSE,
            )
            for mode in ("websocket", "sse")
        ),  # fmt: skip
        Agent("gemini", "gemini", _gemini_env, _gemini, harness.GOOGLE_KEY),
        # Node clients add NODE_EXTRA_CA_CERTS to their own roots; Codex (Rust) reads a whole
        # bundle from CODEX_CA_CERTIFICATE (or SSL_CERT_FILE): llmtap's, system CAs + mitmproxy's.
        Agent("claude-regular", "anthropic", _claude_env, _claude, harness.ANTHROPIC_KEY, ca=NODE_CA),
        Agent("codex-regular", "openai", _codex_env, _codex, harness.OPENAI_KEY, ca=("CODEX_CA_CERTIFICATE", BUNDLE)),
        Agent("gemini-regular", "gemini", _gemini_env, _gemini, harness.GOOGLE_KEY, ca=NODE_CA),
    )
}
SCRIPTS: dict[str, Callable[[], Any]] = {
    "anthropic": scripts.AnthropicScript,
    "bedrock": lambda: scripts.AnthropicScript("bedrock"),
    "vertex": lambda: scripts.AnthropicScript("vertex"),
    "openai": responses.ResponsesScript,
    "gemini": gemini.GeminiScript,
}


@dataclass
class Completed:
    code: int | None  # None: killed at its timeout
    out: str
    err: str


@dataclass
class Run:
    """One agent's run and what it left behind: the upstream's account (its script's
    ledger), the CLI's output, and its records in the shared store."""

    agent: Agent
    home: Path
    script: Any
    key: str | None
    cli: Completed | None = None
    rows: list[dict[str, Any]] = field(default_factory=list)  # its `llmtap export` rows, oldest first
    shown: Completed | None = None  # `llmtap show ID --conversation` of its first tool call

    @property
    def sent(self) -> list[scripts.Sent]:
        return list(self.script.ledger.sent)

    def run_cli(self, bin_dir: Path, base: str, regular: dict[str, str]) -> None:
        """The CLI once, against `base`; `regular` is the environment that sends it through
        the regular proxy instead (empty for a reverse listener)."""
        for folder in (self.home / "tmp", self.home / "work"):
            folder.mkdir(parents=True, exist_ok=True)
        env = self.agent.base_env(self.home, bin_dir) | self.agent.env(base, self.home, self.key or "") | regular
        self.cli = _run(self.agent.command(bin_dir, base), env, self.home / "work", CLI_TIMEOUT)


class ByKey:
    """One upstream for several runs of one route (the two reverse Codex runs, the two
    reverse Claude Code runs): each request goes to the script of the run whose key it
    carries."""

    KEY_HEADERS = ("x-api-key", "x-goog-api-key")

    def __init__(self, runs: list[Run]) -> None:
        self.runs = {run.key: run for run in runs}

    def _run(self, request: Request) -> Run | None:
        bearer = request.headers.get("authorization", "").removeprefix("Bearer ")
        keys = [bearer, *(request.headers.get(name, "") for name in self.KEY_HEADERS)]
        return next((self.runs[key] for key in keys if key in self.runs), None)

    def _script(self, request: Request) -> Any:
        run = self._run(request)
        if run is None:
            raise AssertionError(f"a request with no run's key: {request.method} {request.path}")
        return run.script

    def http(self, request: Request) -> Answer:
        return self._script(request).http(request)

    def websocket(self, request: Request, message: Any) -> Any:
        return self._script(request).websocket(request, message)

    def accepts_websocket(self, request: Request) -> bool:
        run = self._run(request)
        return run is not None and run.agent.websocket


@dataclass
class Session:
    """The proxy, its upstreams and every run; `failure` says why a session could not run."""

    root: Path
    runs: dict[str, Run] = field(default_factory=dict)
    upstreams: dict[str, ScriptedUpstream] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)
    proxy_code: int | None = None
    proxy_log: str = ""
    failure: str | None = None
    outputs: dict[str, Completed] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def db(self) -> str:
        return f"sqlite:///{self.root / 'llmtap.db'}"

    @property
    def llmtap_home(self) -> Path:
        return self.root / "llmtap-home"

    def llmtap(self, *args: str) -> Completed:
        env = harness.clean_env(LLMTAP_HOME=str(self.llmtap_home))
        return _run([str(harness.LLMTAP), *args, "--db", self.db], env, self.root, COMMAND_TIMEOUT)

    def json(self, *args: str) -> Any:
        """The JSON a command printed (asked once, by `collect`)."""
        done = self.outputs[" ".join(args)]
        assert done.code == 0, f"llmtap {' '.join(args)} failed ({done.code}): {done.err[-2000:]}"
        return json.loads(done.out)

    def fingerprint(self, key: str) -> str:
        return KeyFingerprinter.from_file(self.llmtap_home / "fingerprint.secret").fingerprint(key)


def run_session(bin_dir: Path, root: Path) -> Session:
    """Every agent once through one proxy; a failure is kept on the session, not raised."""
    session = Session(root)
    started = time.monotonic()
    try:
        _run_session(session, bin_dir)
        _collect(session)
    except Exception as exc:  # the tests report it
        session.failure = f"{type(exc).__name__}: {exc}"
    session.seconds = time.monotonic() - started
    return session


def _run_session(session: Session, bin_dir: Path) -> None:
    root = session.root
    for name, agent in AGENTS.items():
        key = harness.canary(agent.key_prefix) if agent.key_prefix else None
        session.runs[name] = Run(agent, root / name, None, key)
    with contextlib.ExitStack() as stack:
        tls = _tls(root)
        for name in {run.agent.upstream for run in session.runs.values()}:
            runs = [run for run in session.runs.values() if run.agent.upstream == name]
            for run in runs:
                run.script = (run.agent.script or SCRIPTS[run.agent.route])()
            secure = tls if runs[0].agent.regular else None
            if len(runs) == 1:
                upstream = ScriptedUpstream(runs[0].script, websocket=runs[0].agent.websocket, tls=secure)
            else:
                router = ByKey(runs)
                upstream = ScriptedUpstream(router, websocket=router.accepts_websocket, tls=secure)
            session.upstreams[name] = stack.enter_context(upstream)
            if not runs[0].agent.regular:
                session.ports[name] = free_port()  # its reverse listener
        session.ports["regular"] = free_port()
        proxy = _start_proxy(session)
        try:
            with ThreadPoolExecutor(len(session.runs)) as pool:
                for future in [pool.submit(_client, session, run, bin_dir) for run in session.runs.values()]:
                    future.result()
        finally:
            proxy.send_signal(signal.SIGTERM)
            try:
                session.proxy_code = proxy.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proxy.pid, signal.SIGKILL)
                session.proxy_code = proxy.wait(5)
            session.proxy_log = (root / "proxy.log").read_text(errors="replace")


def _tls(root: Path) -> ssl.SSLContext:
    """The regular-mode upstreams' TLS: a self-signed certificate for localhost (the proxy
    is told not to verify it; the client verifies mitmproxy's)."""
    cert, key = harness.self_signed(root)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return context


def _client(session: Session, run: Run, bin_dir: Path) -> None:
    agent = run.agent
    if not agent.regular:
        run.run_cli(bin_dir, f"http://127.0.0.1:{session.ports[agent.upstream]}", {})
        return
    assert agent.ca is not None
    proxy = f"http://{agent.name}:secret@127.0.0.1:{session.ports['regular']}"  # the user name is the team
    regular = {"HTTPS_PROXY": proxy, agent.ca[0]: str(session.root / agent.ca[1])}
    run.run_cli(bin_dir, session.upstreams[agent.upstream].url, regular)


def _start_proxy(session: Session) -> subprocess.Popen[bytes]:
    root, ports, ups = session.root, session.ports, session.upstreams
    argv = [str(harness.LLMTAP), "proxy", "--quiet", "--port", str(ports["regular"]), "--db", session.db,
            "--confdir", str(root / "mitmproxy"),
            "--set", "ssl_insecure=true"]  # fmt: skip
    for route in ("anthropic", "openai", "gemini"):  # the providers' own reverse listeners
        argv += ["--reverse", f"{route}={ports[route]}", "--upstream", f"{route}={ups[route].url}"]
    for route in ("bedrock", "vertex"):  # a gateway in front of the cloud: mitmproxy's reverse mode
        argv += ["--mode", f"reverse:{ups[route].url}@127.0.0.1:{ports[route]}"]
    log = root / "proxy.log"
    with log.open("wb") as sink:
        proxy = subprocess.Popen(
            argv, env=harness.clean_env(LLMTAP_HOME=str(session.llmtap_home)), cwd=root,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=sink, start_new_session=True,
        )  # fmt: skip
    try:
        for port in ports.values():
            harness.wait_for_port(port, proxy, log, timeout=60)
    except Exception:
        os.killpg(proxy.pid, signal.SIGKILL)
        proxy.wait(5)
        raise
    return proxy


def _pause(session: Session) -> None:
    """Each run with a `pause`, as if it had paused before its last generation: the times
    of its exchanges before that one (its key's) moved back by the pause, in the store the
    proxy wrote (the fact copy follows by its triggers). Only the clock is changed: what
    Codex sent, what the proxy recorded and how the store linked its turns are the run's;
    the stored verdicts are then decided again over the moved clock."""
    paused = [run for run in session.runs.values() if run.agent.pause and run.key]
    if not paused:
        return
    times = (exchanges.c.started_at, exchanges.c.first_byte_at, exchanges.c.first_token_at, exchanges.c.ended_at)
    engine = make_engine(session.db)
    try:
        with engine.begin() as connection:
            for run in paused:
                mine = exchanges.c.key_fingerprint == session.fingerprint(run.key or "")
                rows = connection.execute(
                    select(exchanges.c.id, exchanges.c.protocol, *times).where(mine).order_by(exchanges.c.started_at)
                ).all()
                last = max((r.started_at for r in rows if r.protocol == "openai.responses"), default=None)
                for row in rows:
                    if last is not None and row.started_at < last:
                        moved = {c.name: row._mapping[c.name] - run.agent.pause for c in times if row._mapping[c.name]}
                        connection.execute(update(exchanges).where(exchanges.c.id == row.id).values(**moved))
            # a history whose clock moved is decided again, as `llmtap reprocess` decides
            # it: the verdicts are data, stored when the exchanges were written
            verdicts.recompute_all(connection)
    finally:
        engine.dispose()


def _collect(session: Session) -> None:
    """What the tests read from the store, asked once (after the paused runs' pauses):
    the export (split into each run's records: by key fingerprint, and by route for the
    keyless gateways), the two `--list` reports, and each run's conversation of its first
    tool call."""
    _pause(session)
    done = session.llmtap("export", "--format", "jsonl")
    assert done.code == 0, f"llmtap export failed ({done.code}): {done.err[-2000:]}"
    rows = sorted((json.loads(line) for line in done.out.splitlines() if line.strip()),
                  key=lambda row: (row["started_at"], row["id"]))  # fmt: skip
    for run in session.runs.values():
        if run.key is not None:
            mine = session.fingerprint(run.key)
            run.rows = [row for row in rows if row["key_fingerprint"] == mine]
        else:
            pattern = scripts.BEDROCK if run.agent.route == "bedrock" else scripts.VERTEX
            run.rows = [r for r in rows if not r["key_fingerprint"] and pattern.search(r["path"].split("?")[0])]
    commands = [("report", kind, "--list", "--format", "json") for kind in ("tools", "cache")]
    shows = {}
    for run in session.runs.values():
        first_call = next((row for row in run.rows if row.get("tool_calls")), None)
        if first_call is not None:
            shows[run.agent.name] = ("show", first_call["id"], "--conversation", "--format", "json")
    with ThreadPoolExecutor(4) as pool:
        results = dict(zip(commands, pool.map(lambda args: session.llmtap(*args), commands), strict=True))
        shown = dict(zip(shows, pool.map(lambda args: session.llmtap(*args), shows.values()), strict=True))
    session.outputs = {" ".join(args): done for args, done in results.items()}
    for name, output in shown.items():
        session.runs[name].shown = output


def _run(argv: list[str], env: dict[str, str], cwd: Path, timeout: float) -> Completed:
    """A subprocess with a hard timeout: on expiry its whole process group is killed."""
    with subprocess.Popen(
        argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True,
    ) as proc:  # fmt: skip
        try:
            out, err = proc.communicate(timeout=timeout)
            return Completed(proc.returncode, out, err)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            return Completed(None, out, err + f"\n[killed after {timeout:.0f}s]")
