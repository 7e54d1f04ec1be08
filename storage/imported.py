"""What `llmtap import` believes of a line of llmtap's own files (SPEC §4, trust is never
inherited): the rejected file's records, refused rows and follow-ups, and the spool's
batches when such a file is imported.

A line keeps who and when llmtap recorded (those came from the proxy's own checks, and
a line carries no credentials to check again), but never its own word on whether its
destination may bill: the trusted-host rule is decided again from the host it names
(`ingest.trusted_host`), and any price the line carries is dropped for the writer's
pricer to decide. `--team` names the team of a line that no rule named.

Not responsible for HAR and flow entries (`ingest.to_record` decides all of theirs),
for reading the lines (`rejected.py`), or for writing them (the writer).
"""

from __future__ import annotations

from typing import Any

from llmtap.protocols.providers import DEFAULT, ProviderNames
from llmtap.storage import threads
from llmtap.storage.followups import FollowUp
from llmtap.storage.ingest import trusted_host
from llmtap.storage.record import Recorded
from llmtap.storage.rows import PRICE_COLUMNS, RowSet
from llmtap.storage.teams import UNATTRIBUTED, clean_team


def retrust(
    line: Recorded | RowSet | FollowUp, import_team: str | None = None, providers: ProviderNames = DEFAULT
) -> None:
    """Make the line what an import may store (see the module's docstring), in place.
    `providers`: with the config's `[[providers]]`, whose hosts may bill too."""
    if isinstance(line, FollowUp):
        _record(line.record, import_team, providers)
    elif isinstance(line, Recorded):
        _record(line, import_team, providers)
    else:
        for row in line.exchanges:
            _row(row, import_team, providers)


def _unnamed(attribution: str | None, team: str | None) -> bool:
    return attribution in (None, "none") and (team or UNATTRIBUTED) == UNATTRIBUTED


def _record(record: Recorded, import_team: str | None, providers: ProviderNames) -> None:
    record.price_reason = trusted_host(record.host, providers)
    team = clean_team(import_team)
    if team and _unnamed(record.attribution, record.team):
        record.team, record.attribution = team, "import"


def _row(row: dict[str, Any], import_team: str | None, providers: ProviderNames) -> None:
    row.update(dict.fromkeys(PRICE_COLUMNS))  # the writer's pricer prices it, or it stays unpriced
    row["price_reason"] = trusted_host(row.get("host"), providers)
    team = clean_team(import_team)
    if team and _unnamed(row.get("attribution"), row.get("team")):
        row["team"], row["attribution"] = team, "import"
        session = row.get("client_session_id")
        if session:  # a session's thread is scoped by key, else by team
            row["thread_key"] = threads.session_key(threads.scope(row.get("key_fingerprint"), team), session)
