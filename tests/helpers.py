"""The helpers every test folder shares: a free port on 127.0.0.1 and one way to run the
`llmtap` command, in this process (fast) or as the installed console script (a real
process, as a user runs it). The isolated LLMTAP_HOME is a fixture in tests/conftest.py.

Not responsible for stores, traffic or assertions about what a command printed.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from decimal import Decimal
from io import StringIO
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, event

from tests.corpus_tools import ROOT

CONSOLE_SCRIPT = Path(sys.executable).parent / "llmtap"


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (right now)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        """The output as JSON, numbers with a fraction as exact Decimals."""
        return json.loads(self.out, parse_float=Decimal)


@contextmanager
def _environment(changes: Mapping[str, str | None]) -> Iterator[None]:
    """os.environ with `changes` applied (None removes a name), restored afterwards."""
    saved = {name: os.environ.get(name) for name in changes}
    try:
        for name, value in changes.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _in_process(args: tuple[str, ...], env: Mapping[str, str | None], stdin: str | None) -> CliResult:
    from llmtap.cli.main import main

    engines: set[Engine] = set()

    def remember(connection: Any) -> None:
        engines.add(connection.engine)

    out, err = StringIO(), StringIO()
    event.listen(Engine, "engine_connect", remember)
    try:
        with _environment(env), _stdin(stdin), redirect_stdout(out), redirect_stderr(err):
            code = main(list(args))
    finally:
        event.remove(Engine, "engine_connect", remember)
        for engine in engines:  # the command's own engines, closed as its exit would close them
            engine.dispose()
    return CliResult(code, out.getvalue(), err.getvalue())


@contextmanager
def _stdin(text: str | None) -> Iterator[None]:
    """sys.stdin reading `text` (a pipe, not a terminal), restored afterwards; as it was for None."""
    if text is None:
        yield
        return
    saved, sys.stdin = sys.stdin, StringIO(text)
    try:
        yield
    finally:
        sys.stdin = saved


def _as_process(
    args: tuple[str, ...], env: Mapping[str, str | None], timeout: float, cwd: Path, stdin: str | None
) -> CliResult:
    command = [str(CONSOLE_SCRIPT)] if CONSOLE_SCRIPT.exists() else [sys.executable, "-m", "llmtap.cli.main"]
    environment = {**os.environ, **{k: v for k, v in env.items() if v is not None}}
    for name in (k for k, v in env.items() if v is None):
        environment.pop(name, None)
    done = subprocess.run(
        [*command, *args], capture_output=True, text=True, env=environment, cwd=cwd, timeout=timeout, input=stdin
    )
    return CliResult(done.returncode, done.stdout, done.stderr)


def llmtap(
    *args: str,
    env: Mapping[str, str | None] | None = None,
    process: bool = False,
    timeout: float = 180,
    cwd: Path = ROOT,
    stdin: str | None = None,
) -> CliResult:
    """`llmtap ARGS…`: in this process through the same `main` the console script calls
    (`env` applied for the call), or with `process=True` as the console script in a child
    process of its own (`env` on top of this process's environment). `stdin`: what the
    command reads on standard input (a pipe). Never a traceback."""
    if process:
        result = _as_process(args, env or {}, timeout, cwd, stdin)
    else:
        result = _in_process(args, env or {}, stdin)
    assert "Traceback" not in result.err, result.err  # every failure a user can cause is one line
    return result
