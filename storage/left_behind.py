"""The proxy's last line, once its writer has closed: what this run wrote, what waits in
the spool and where, what was rejected and what is lost, in exact counts (the writer's
own stats, `WriterStats.in_spool` and `lost` counted as it closed):

    llmtap: stopped: 12 records written to the store this run, 4 in the spool at
        /home/x/.llmtap/spool (written when the database is back), 1 rejected (kept in
        /home/x/.llmtap/spool/rejected.jsonl, which `llmtap import` takes back), 2 lost

(one line). `written` counts the records the store took in this run, including spooled
ones it replayed; `lost` what neither the database nor the disk took, and what was not
handed over when the writer stopped; `left out`, when there are any, the records the writer
found to be no generation after all (SPEC §1).

Not responsible for the counting (storage.writer) or for printing it (the proxy's CLI).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def line(stats: Any, spool_dir: Path, *, not_handed: int = 0) -> str:
    written = stats.written + stats.replayed
    parts = [
        f"{_records(written)} written to the store this run",
        f"{stats.in_spool:,} in the spool at {spool_dir}"
        + (" (written when the database is back)" if stats.in_spool else ""),
        f"{stats.rejected:,} rejected"
        + (f" (kept in {spool_dir / 'rejected.jsonl'}, which `llmtap import` takes back)" if stats.rejected else ""),
    ]
    if stats.skipped:  # the writer found them no generation (another API on an LLM path)
        parts.append(f"{stats.skipped:,} left out (not LLM generations)")
    lost = stats.lost + not_handed
    if lost:
        parts.append(f"{lost:,} lost")
    return "llmtap: stopped: " + ", ".join(parts)


def _records(count: int) -> str:
    return f"{count:,} record" + ("" if count == 1 else "s")
