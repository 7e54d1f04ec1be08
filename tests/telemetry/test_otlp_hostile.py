"""A hostile OTLP collector, through the real proxy: it takes the spans and answers every
export with a gzip bomb (1 MB on the wire, 512 MiB once decompressed). The exporter reads
at most a few KiB of a collector's answer and never decompresses it, so the writer's
process stays small, every exchange is stored, and the spans keep going out.

Not responsible for an endpoint that is away (test_otlp_proxy.py) or the span's mapping.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import zlib
from pathlib import Path

import pytest

from llmtap.simulator.upstream import Upstream
from tests.e2e import harness
from tests.helpers import free_port
from tests.protocols.corpus import load_cases
from tests.telemetry.otlp_receiver import Receiver
from tests.telemetry.test_metrics_proxy import _writer_child
from tests.telemetry.test_otlp_proxy import _send, _settled

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

BOMB_MIB = 512
WRITER_PEAK_MB = 400  # the writer's process peaks near 150 MB on its own; the bomb alone is 512


def gzip_bomb(mib: int) -> list[bytes]:
    """`mib` MiB of zeros, gzipped (as Content-Encoding: gzip wants), made a MiB at a time."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(1 << 20)
    chunks = [packer.compress(zeros) for _ in range(mib)]
    return [chunk for chunk in chunks if chunk] + [packer.flush()]


def _peak_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads the writer's peak memory from /proc")
def test_a_gzip_bomb_from_the_collector_leaves_the_writer_small(tmp_path: Path) -> None:
    bomb = gzip_bomb(BOMB_MIB)
    assert sum(map(len, bomb)) < 2 << 20
    case = next(c for c in load_cases() if c.id == "a_oai_json_text_basic")
    routes = harness.Routes()
    token = routes.add(harness.json_reply(case))
    headers = {"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"}
    db, log = tmp_path / "llmtap.db", tmp_path / "proxy.log"
    with Receiver(answer=(headers, bomb)) as receiver, Upstream(routes) as upstream:
        port = free_port()
        args = [
            str(harness.LLMTAP), "proxy", "--quiet", "--no-regular",
            "--db", f"sqlite:///{db}", "--confdir", str(tmp_path / "mitmproxy"),
            "--reverse", f"openai={port}", "--upstream", f"openai={upstream.url}",
            "--otlp-endpoint", receiver.url,
        ]  # fmt: skip
        with log.open("wb") as out:
            proc = subprocess.Popen(
                args, env=harness.clean_env(LLMTAP_HOME=str(tmp_path / "home")), stdout=subprocess.DEVNULL, stderr=out
            )
        keys = {"openai": harness.canary(harness.OPENAI_KEY)}
        try:
            harness.wait_for_port(port, proc, log)
            for sent in (1, 2, 3):  # one export each: the next is sent once the last answer was read
                assert _send({"openai": port}, keys, case, token, team="team-a") == 200
                _settled(db, sent)
                receiver.wait_for(sent, timeout=60)
            peak = _peak_mb(_writer_child(proc.pid))
        finally:
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(60)
    text = log.read_text(errors="replace")
    assert code == 0 and "Traceback" not in text, text[-3000:]
    assert peak < WRITER_PEAK_MB, f"the writer's process peaked at {peak:.0f} MB"
    with sqlite3.connect(db) as connection:
        assert connection.execute("SELECT count(*) FROM exchanges").fetchone()[0] == 3
    print(f"\notlp gzip bomb ({BOMB_MIB} MiB): the writer's process peaked at {peak:.0f} MB")
