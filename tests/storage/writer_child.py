"""A writer in a process of its own, for the fault tests that kill or stop it.

    python -m tests.storage.writer_child MODE URL SPOOL [options]

MODE `ack`: submit records in batches and print `ACK <n>` after each `flush()`.
MODE `term`: submit records until SIGTERM, whose handler calls `writer.close()` and
prints `SUBMITTED <n> CLOSED <bool>`.
MODE `overlap`: wait for a line on stdin, submit the `--shared` records (own ids, response
ids both processes use), then the records of `--ranges` (`A:B,C:D`, in that order), wait
until the spool is empty, close, print `DONE <n> CLOSED <bool> SPOOLED <n> WRITTEN <n>
DUPLICATES <n>`.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

from llmtap.storage.engine import make_engine
from llmtap.storage.writer import Writer
from tests.storage.helpers import make_record, spool_files, wait_until


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=("ack", "term", "overlap"))
    parser.add_argument("url")
    parser.add_argument("spool", type=Path)
    parser.add_argument("--prefix", default="K")
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--batches", type=int, default=1000)
    parser.add_argument("--ranges", default="", help="A:B,C:D — record indices to submit, in order")
    parser.add_argument("--shared", type=int, default=0, help="records that share response ids with the other process")
    parser.add_argument("--busy-ms", type=int, default=5000)
    args = parser.parse_args()
    engine = make_engine(args.url, busy_timeout_ms=args.busy_ms)
    writer = Writer(engine, spool_dir=args.spool, batch_size=50, max_delay=0.02, retry_initial=0.05, retry_max=0.2)
    if args.mode == "ack":
        for batch in range(args.batches):
            for i in range(batch * args.batch, (batch + 1) * args.batch):
                writer.submit(make_record(i, prefix=args.prefix))
            writer.flush()
            print(f"ACK {(batch + 1) * args.batch}", flush=True)
        return 0
    if args.mode == "term":
        return _until_term(writer, args.prefix)
    sys.stdin.readline()  # both processes start together
    submitted = 0
    for i in range(args.shared):  # a retry seen by each proxy: own id, same response
        writer.submit(make_record(100_000 + i, prefix=args.prefix, response_id=f"msg_shared_{i}"))
        submitted += 1
    for span in filter(None, args.ranges.split(",")):
        first, last = map(int, span.split(":"))
        for i in range(first, last):
            writer.submit(make_record(i, prefix="O"))
            submitted += 1
    writer.flush()
    wait_until(lambda: not spool_files(args.spool), timeout=30)
    closed = writer.close()
    stats = writer.stats
    print(
        f"DONE {submitted} CLOSED {closed} SPOOLED {stats.spooled} WRITTEN {stats.written} "
        f"DUPLICATES {stats.duplicates}",
        flush=True,
    )
    return 0


def _until_term(writer: Writer, prefix: str) -> int:
    submitted = 0

    def on_term(signum, frame) -> None:
        closed = writer.close()
        print(f"SUBMITTED {submitted} CLOSED {closed}", flush=True)
        os._exit(0)

    signal.signal(signal.SIGTERM, on_term)
    print("READY", flush=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        writer.submit(make_record(submitted, prefix=prefix))
        submitted += 1
        if submitted % 200 == 0:
            time.sleep(0.01)  # load, not a queue growing without end
    print("NO SIGTERM", flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
