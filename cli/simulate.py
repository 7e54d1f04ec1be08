"""`llmtap simulate`: the demo's simulated provider (llmtap.simulator) as a server of its own
on 127.0.0.1, for trying the proxy with curl, an SDK or an agent without API keys. It
answers Anthropic Messages, OpenAI Chat Completions and Responses, and Gemini
generateContent and Interactions, streamed or not, with a prompt cache that hits and
misses; it prints the `llmtap proxy` command that records it and what to point each
client at, then serves until SIGINT or SIGTERM.

Not responsible for what the answers say (simulator/plan.py, steered by markers in the
last user message) or for recording anything: that is the proxy's job.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import threading
import time
from types import FrameType
from typing import Any

from llmtap.cli.errors import UsageError

DEFAULT_PORT = 8090
# the reverse listeners the printed `llmtap proxy` command opens, one per protocol family
PROXY_PORTS = {"anthropic": 8081, "openai": 8082, "gemini": 8083}
MARKERS = "[tool:NAME], [malformed], [error:429], [error:529], [midstream-error], [blocked]"


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "simulate",
        help="a simulated LLM provider on 127.0.0.1, to try the proxy with curl, an SDK or an agent without keys",
        description="Serve the demo's simulated LLM provider on 127.0.0.1 until Ctrl-C or SIGTERM: "
        "Anthropic, OpenAI and Gemini wire formats, streams, a prompt cache that hits and misses, "
        "no keys and no network. Prints the `llmtap proxy` command that records it and the base "
        "URLs to give curl, an SDK or an agent.",
    )
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port on 127.0.0.1 (default {DEFAULT_PORT}; 0: a free one)"
    )
    parser.add_argument("--quiet", action="store_true", help="print no line per request")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from llmtap.simulator.provider import SimulatedProvider
    from llmtap.simulator.upstream import Reply, Seen, Upstream

    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port must be 0-65535, not {args.port}")
    provider = SimulatedProvider()

    def router(seen: Seen) -> Reply:
        reply = provider(seen)
        if not args.quiet:
            stream = " (stream)" if "event-stream" in reply.content_type else ""
            print(f"{time.strftime('%H:%M:%S')} {seen.method} {seen.path} -> {reply.status}{stream}", flush=True)
        return reply

    try:
        upstream = Upstream(router, port=args.port, remember=False).__enter__()
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        raise UsageError(f"cannot listen on 127.0.0.1:{args.port}: {reason} (--port 0 takes a free one)") from None
    try:
        print(instructions(upstream.url), flush=True)
        _wait_for_a_signal()
    finally:
        upstream.__exit__(None, None, None)
    print(f"llmtap simulate: stopped after {provider.counter:,} requests", flush=True)
    return 0


def _wait_for_a_signal() -> None:
    """Until SIGINT (Ctrl-C) or SIGTERM; both are the normal way to stop, so exit 0."""
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous: dict[signal.Signals, Any] = {}
    for number in (signal.SIGINT, signal.SIGTERM):
        previous[number] = signal.signal(number, on_signal)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler if handler is not None else signal.SIG_DFL)


def proxy_command(url: str) -> list[str]:
    """The `llmtap proxy` command that records traffic to the simulator at `url`."""
    command = ["llmtap", "proxy", "--no-regular"]
    for name, port in PROXY_PORTS.items():
        command += ["--reverse", f"{name}={port}", "--upstream", f"{name}={url}"]
    return command


def instructions(url: str) -> str:
    anthropic, openai, gemini = (f"http://127.0.0.1:{port}" for port in PROXY_PORTS.values())
    body = '{"model": "claude-sonnet-4-6", "max_tokens": 200, "messages": [{"role": "user", "content": "Hello"}]}'
    curl = (
        f"curl {anthropic}/v1/messages -H 'x-api-key: sk-ant-test' -H 'anthropic-version: 2023-06-01' "
        f"-H 'content-type: application/json' -d '{body}'"
    )
    return "\n".join(
        [
            f"llmtap simulate: a simulated provider on {url} (Anthropic, OpenAI and Gemini APIs, streams, "
            "prompt cache hits and misses; no keys, no network)",
            "",
            "Record it: run the proxy in another terminal:",
            "  " + shlex.join(proxy_command(url)),
            "",
            "then point clients at the proxy (any key is accepted):",
            *(
                f"  {label + ':':<26}{text}"
                for label, text in (
                    ("curl", curl),
                    ("Anthropic SDK", f"ANTHROPIC_BASE_URL={anthropic} ANTHROPIC_API_KEY=sk-ant-test"),
                    ("Claude Code", f"ANTHROPIC_BASE_URL={anthropic} ANTHROPIC_API_KEY=sk-ant-test claude"),
                    ("OpenAI SDK", f"OPENAI_BASE_URL={openai}/v1 OPENAI_API_KEY=sk-test"),
                    ("Codex CLI", f"CODEX_API_KEY=sk-test codex exec -c 'openai_base_url=\"{openai}/v1\"' …"),
                    ("Google GenAI SDK", f"GOOGLE_GEMINI_BASE_URL={gemini} GEMINI_API_KEY=test"),
                )
            ),
            "and see it: llmtap log; llmtap report cost; llmtap report cache",
            "",
            f"Markers in the last user message steer the answer: {MARKERS}.",
            f"Straight at the simulator (nothing recorded): {url}. Ctrl-C stops it.",
        ]
    )
