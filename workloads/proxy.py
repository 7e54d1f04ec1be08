"""`Proxy`: `llmtap proxy` in a child process, with a reverse listener on a free port for
each of Anthropic, OpenAI and Gemini in front of one upstream, its output in a log file.

Not responsible for the load sent through it (the faults bench, the hardening tests) nor
for a fleet of proxies that restart on their ports (`fleet.py`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from llmtap.workloads.network import free_port, wait_listening


class Proxy:
    def __init__(
        self,
        folder: Path,
        db_url: str,
        upstream: str,
        spool: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.ports = {name: free_port() for name in ("anthropic", "openai", "gemini")}
        command = [
            sys.executable,
            "-m",
            "llmtap.cli.main",
            "proxy",
            "--no-regular",
            "--quiet",
            "--db",
            db_url,
            "--confdir",
            str(folder / "mitmproxy"),
        ]
        for name, port in self.ports.items():
            command += ["--reverse", f"{name}={port}", "--upstream", f"{name}={upstream}"]
        environment = dict(os.environ, LLMTAP_HOME=str(folder / "home"), **(env or {}))
        if spool is not None:
            environment["LLMTAP_SPOOL"] = str(spool)
        self.path = folder / f"proxy-{time.time_ns()}.log"
        self.log = open(self.path, "wb")  # noqa: SIM115
        self.process = subprocess.Popen(command, env=environment, stdout=self.log, stderr=subprocess.STDOUT)
        for port in self.ports.values():
            wait_listening(port, self.process, self.path, 60)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 180) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        status = self.process.wait(timeout=timeout)
        self.log.close()
        return status
