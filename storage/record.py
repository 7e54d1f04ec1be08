"""What a recorder hands the store: a canonical exchange plus who, when and where.

Built by the addon (live traffic) and the importers (HAR, flow files) alike. Holds no
API key: only its fingerprint and last four characters, and headers already redacted.
Not responsible for turning itself into rows (see `rows.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from llmtap.protocols.canonical import Exchange
from llmtap.storage.ids import new_id


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(slots=True)
class Recorded:
    exchange: Exchange
    started_at: datetime
    id: str = ""
    first_byte_at: datetime | None = None
    first_token_at: datetime | None = None
    ended_at: datetime | None = None
    team: str = "unattributed"
    attribution: str = "none"  # which rule named the team (SPEC §4): proxy_auth, header, listener, key_map, none
    key_fingerprint: str | None = None
    key_last4: str | None = None
    key_secret_id: str | None = None  # the id of the secret `key_fingerprint` was made with
    client_addr: str | None = None
    source: str = "proxy"
    method: str | None = "POST"
    host: str | None = None
    # where it went: `scheme://host:port` of the server (protocols/hosts.py `destination`);
    # a follow-up of background work continues only a POST that went to the same one
    destination: str | None = None
    path: str | None = None  # with key-bearing query parameters redacted
    retry_after_s: float | None = None
    request_body: bytes | None = None
    response_body: bytes | None = None  # after content decoding
    response_content_type: str | None = None
    request_headers: list[tuple[str, str]] = field(default_factory=list)  # redacted
    # why it must stay unpriced whatever it claims: `unverified_host` (protocols/hosts.py)
    price_reason: str | None = None
    # the tags the request carried (X-LLMTap-Tags) under the configured ones: protocols/who_asked.py
    tags: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.id:
            self.id = new_id(int(self.started_at.timestamp() * 1000))
