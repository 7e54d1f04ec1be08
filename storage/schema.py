"""The store's tables (SQLAlchemy Core), shared by SQLite and PostgreSQL.

`exchanges` holds one row per exchange with every canonical field; usage columns follow
the OpenTelemetry GenAI names (`usage_input_tokens` includes cached input,
`usage_output_tokens` includes reasoning). `tool_calls` holds each call with its status.
`bodies` holds compressed, content-addressed blobs; `body_refs` says which exchange uses
which blob, so a conversation's repeated prefix is stored once and pruning can collect.
`exchange_facts` and `tool_call_facts` are narrow copies of what the reports read, kept
by triggers (see `facts.py`): a report scans a tenth of the bytes a scan of `exchanges`
would, whose rows carry answer text, tool specs and request parameters.

Not responsible for writing rows (see `writer.py` and `batch_insert.py`) or for migrations (see `migrations/`,
which must describe exactly these tables).
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    LargeBinary,
    MetaData,
    Table,
    text,
)
from sqlalchemy.dialects import postgresql

from llmtap.storage.storable import StoredBigInteger, StoredInteger, StoredString, StoredText

# Constraint names are explicit so batch migrations on SQLite can alter them.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING_CONVENTION)

JSONType = JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")
Timestamp = DateTime(timezone=True)

exchanges = Table(
    "exchanges",
    metadata,
    Column("id", StoredString(26), primary_key=True),  # time-ordered, made by the recorder
    Column("dedupe_key", StoredString(32), nullable=True, unique=True),
    # who and where
    Column("team", StoredString(200), nullable=False, server_default="unattributed"),
    # which rule named the team (SPEC §4); NULL on rows stored before the rule was kept
    Column("attribution", StoredString(16), nullable=True),
    Column("key_fingerprint", StoredString(32), nullable=True),
    Column("key_last4", StoredString(4), nullable=True),
    # which secret made `key_fingerprint` (its id, `KeyFingerprinter.secret_id`; never the
    # secret): NULL on rows stored before the store kept its secret (store_secret.py)
    Column("key_secret_id", StoredString(16), nullable=True),
    Column("client_addr", StoredString(64), nullable=True),
    # what the request says it is for (protocols/who_asked.py; SPEC §4), NULL before 0014:
    # its tags as a JSON object of text (compact, names sorted) and the end user it names
    Column("tags", StoredText, nullable=True),
    Column("end_user", StoredString(256), nullable=True),
    Column("source", StoredString(16), nullable=False, server_default="proxy"),
    Column("method", StoredString(10), nullable=True),
    Column("host", StoredString(255), nullable=True),
    # `scheme://host:port` of the server it went to (protocols/hosts.py): what a follow-up
    # of background work must have reached to continue it. NULL before revision 0010.
    Column("destination", StoredText, nullable=True),
    Column("path", StoredText, nullable=True),
    # when
    Column("started_at", Timestamp, nullable=False),
    Column("first_byte_at", Timestamp, nullable=True),
    Column("first_token_at", Timestamp, nullable=True),
    Column("ended_at", Timestamp, nullable=True),
    Column("ttfb_ms", Float, nullable=True),
    Column("ttft_ms", Float, nullable=True),
    Column("duration_ms", Float, nullable=True),
    # the canonical exchange (SPEC §2)
    Column("protocol", StoredString(32), nullable=False),
    Column("provider", StoredString(255), nullable=True),
    Column("streamed", Boolean, nullable=False),
    Column("status", StoredInteger, nullable=True),
    Column("complete", Boolean, nullable=False),
    Column("model_requested", StoredString(255), nullable=True),
    Column("model", StoredString(255), nullable=True),
    Column("response_id", StoredString(255), nullable=True),
    Column("finish_reason", StoredString(32), nullable=True),
    Column("finish_reason_raw", StoredString(64), nullable=True),
    Column("usage_input_tokens", StoredBigInteger, nullable=True),
    Column("usage_cache_read_input_tokens", StoredBigInteger, nullable=True),
    Column("usage_cache_creation_input_tokens", StoredBigInteger, nullable=True),
    Column("usage_cache_creation_5m_input_tokens", StoredBigInteger, nullable=True),
    Column("usage_cache_creation_1h_input_tokens", StoredBigInteger, nullable=True),
    Column("usage_output_tokens", StoredBigInteger, nullable=True),
    Column("usage_reasoning_output_tokens", StoredBigInteger, nullable=True),
    Column("usage_total_tokens_reported", StoredBigInteger, nullable=True),
    Column("usage_provenance", StoredString(16), nullable=False),
    Column("usage_raw", JSONType, nullable=True),
    Column("usage_check", JSONType, nullable=True),
    # non-text counts by genai-prices unit name, and other models' usage (advisor):
    # see protocols/canonical.py `Usage.modalities` and `Usage.sub_usages`
    Column("usage_modalities", JSONType, nullable=True),
    Column("usage_sub", JSONType, nullable=True),
    # what was served, as far as it changes the price (SPEC §2, §5)
    Column("service_tier", StoredString(16), nullable=True),
    Column("inference_geo", StoredString(16), nullable=True),
    Column("service_speed", StoredString(16), nullable=True),
    Column("server_tool_uses", JSONType, nullable=True),
    # agent traffic (SPEC §2, §5): a request that asks for no generation; the session id
    # the client states; the conversation's explicit identity (session or response chain,
    # NULL where only the prefix rule can tell); a background response's last known state
    Column("warmup", Boolean, nullable=False, server_default=text("false")),
    Column("client_session_id", StoredString(255), nullable=True),
    Column("thread_key", StoredString(32), nullable=True),
    # the exchange whose response this request names (`previous_response_id`), found by
    # storage/threads.py when it was written: the turn its cache verdict compares it with
    Column("previous_exchange_id", StoredString(26), nullable=True),
    # Verdicts, decided when the exchange is written (storage/verdicts.py, rules in
    # protocols/rules.py; schema 0013): the conversation (its first exchange's id), the
    # prompt-cache verdict against the turn before it, and the conversation's tool problems
    # found at this exchange. `line_key` and `conversation_key` find its neighbours.
    Column("line_key", StoredString(16), nullable=True),
    Column("conversation_key", StoredString(32), nullable=True),
    Column("conversation_id", StoredString(26), nullable=True),
    Column("cache_verdict", StoredString(16), nullable=True),  # first | hit | miss | not_cacheable
    Column("cache_cause", StoredString(24), nullable=True),
    Column("cache_message_index", StoredInteger, nullable=True),
    Column("cache_missed_tokens", StoredBigInteger, nullable=True),
    Column("cache_previous_id", StoredString(26), nullable=True),
    Column("cache_gap_ms", StoredBigInteger, nullable=True),
    Column("tool_problems", JSONType, nullable=True),  # [{status, call_id, tool, next_id}]
    Column("background_state", StoredString(16), nullable=True),
    Column("text", StoredText, nullable=True),
    Column("text_truncated", Boolean, nullable=False, server_default=text("false")),
    Column("refusal", StoredText, nullable=True),
    Column("reasoning_blocks", StoredInteger, nullable=False, server_default="0"),
    Column("tool_call_count", StoredInteger, nullable=False, server_default="0"),
    Column("server_tool_calls", JSONType, nullable=True),
    Column("error_type", StoredString(128), nullable=True),
    Column("error_code", StoredString(128), nullable=True),
    Column("error_message", StoredText, nullable=True),
    Column("retry_after_s", Float, nullable=True),
    Column("events", StoredInteger, nullable=False, server_default="0"),
    Column("interrupted", StoredText, nullable=True),
    Column("decode_error", StoredText, nullable=True),
    # the request facts reports need
    Column("request_stream", Boolean, nullable=True),
    Column("request_max_tokens", StoredBigInteger, nullable=True),
    Column("request_tools", JSONType, nullable=True),
    Column("request_server_tools", JSONType, nullable=True),
    Column("request_tool_choice", JSONType, nullable=True),
    Column("request_messages_by_role", JSONType, nullable=True),
    Column("request_message_count", StoredInteger, nullable=True),
    Column("request_system_chars", StoredInteger, nullable=True),
    Column("request_images", StoredInteger, nullable=True),
    Column("request_cache_breakpoints", StoredInteger, nullable=True),
    Column("request_cache_ttl", StoredString(8), nullable=True),
    Column("request_prompt_cache_key", StoredString(255), nullable=True),
    Column("request_previous_response_id", StoredString(255), nullable=True),
    Column("request_cached_content", StoredString(255), nullable=True),
    Column("request_thinking", JSONType, nullable=True),
    Column("request_tool_result_ids", JSONType, nullable=True),
    Column("request_tool_call_ids", JSONType, nullable=True),
    Column("request_params", JSONType, nullable=True),
    # prefix hashes for cache analysis
    Column("tools_hash", StoredString(16), nullable=True),
    Column("system_hash", StoredString(16), nullable=True),
    Column("first_message_hash", StoredString(16), nullable=True),
    Column("message_hashes", JSONType, nullable=True),
    Column("message_chars", JSONType, nullable=True),
    # the same prefix in parts (protocols/prefix.py), where a follow-up may extend it:
    # {"own": the request's parts, "effective": what it stands on, once it names a response}.
    # A chained request's tools_hash and system_hash are those of what it stands on.
    Column("request_prefix", JSONType, nullable=True),
    # stored bodies (SPEC §4 body setting); blobs live in `bodies`
    Column("body_mode", StoredString(8), nullable=False, server_default="metadata"),
    Column("request_body_ref", StoredString(64), nullable=True),
    Column("response_body_ref", StoredString(64), nullable=True),
    Column("response_content_type", StoredString(128), nullable=True),
    # cost (analytics.pricing fills these): pico-dollars (1e-12 USD) as integers, so no
    # database rounds money; rates are per token, for what-if sums such as cache misses
    Column("price_status", StoredString(16), nullable=True),  # priced | unpriced | usage_missing
    Column("price_reason", StoredString(32), nullable=True),  # why unpriced: unverified_host | unknown_model
    Column("price_model", StoredString(255), nullable=True),
    Column("price_version", StoredString(96), nullable=True),
    Column("cost_input_pico", StoredBigInteger, nullable=True),
    Column("cost_cache_read_pico", StoredBigInteger, nullable=True),
    Column("cost_cache_write_pico", StoredBigInteger, nullable=True),
    Column("cost_output_pico", StoredBigInteger, nullable=True),
    Column("cost_fee_pico", StoredBigInteger, nullable=True),  # per-use fees of server_tool_uses
    Column("cost_total_pico", StoredBigInteger, nullable=True),
    # how the total was made: the price context, each model's part (an advisor's too)
    # and each fee, for `show` and audits
    Column("cost_detail", JSONType, nullable=True),
    Column("rate_input_pico", StoredBigInteger, nullable=True),
    Column("rate_cache_read_pico", StoredBigInteger, nullable=True),
    Index("ix_exchanges_started_at", "started_at"),
    Index("ix_exchanges_team_started_at", "team", "started_at"),
    Index("ix_exchanges_model", "model"),
    Index("ix_exchanges_first_message_hash", "first_message_hash"),
    Index("ix_exchanges_response_id", "response_id"),
    Index("ix_exchanges_line_key", "line_key", "started_at"),
    Index("ix_exchanges_conversation_key", "conversation_key", "started_at"),
    Index("ix_exchanges_conversation_id", "conversation_id"),
)

# Settings that belong to the store rather than to one machine's config: the price file
# every command prices with once `llmtap reprice --prices FILE` installed it (key
# `price_file`: {name, digest, content}), so a shared PostgreSQL store prices alike for all.
store_settings = Table(
    "store_settings",
    metadata,
    Column("key", StoredString(64), primary_key=True),
    Column("value", JSONType, nullable=False),
    Column("updated_at", Timestamp, nullable=False),
)

tool_calls = Table(
    "tool_calls",
    metadata,
    Column("exchange_id", StoredString(26), ForeignKey("exchanges.id", ondelete="CASCADE"), primary_key=True),
    Column("position", StoredInteger, primary_key=True),
    Column("call_id", StoredString(255), nullable=True),
    Column("name", StoredString(255), nullable=True),
    Column("arguments", JSONType, nullable=True),
    Column("arguments_raw", StoredText, nullable=True),
    Column("arguments_chars", StoredInteger, nullable=False, server_default="0"),
    Column("valid_json", Boolean, nullable=False),
    Column("status", StoredString(24), nullable=False),
    Column("status_detail", StoredText, nullable=True),
    Column("kind", StoredString(16), nullable=False, server_default="function"),  # function | custom
    Index("ix_tool_calls_call_id", "call_id"),
    Index("ix_tool_calls_status", "status"),
)

bodies = Table(
    "bodies",
    metadata,
    Column("hash", StoredString(64), primary_key=True),  # sha256 of the uncompressed bytes
    Column("encoding", StoredString(8), nullable=False),  # how `data` is compressed: zstd
    Column("size", StoredBigInteger, nullable=False),
    Column("data", LargeBinary, nullable=False),
)

body_refs = Table(
    "body_refs",
    metadata,
    Column("exchange_id", StoredString(26), ForeignKey("exchanges.id", ondelete="CASCADE"), primary_key=True),
    Column("body_hash", StoredString(64), primary_key=True),
    Index("ix_body_refs_body_hash", "body_hash"),
)


# What the reports, the audit log and the dashboard read through DuckDB (analytics/duck.py
# points its views here); migration 0003 made these tables with these columns, 0005 added
# `price_reason` (reports list why an exchange is unpriced), 0006 `service_tier` (--by
# tier) and `cost_fee_pico`, 0007 `warmup`, `thread_key`,
# `background_state` and the tool calls' `kind`, 0012 `previous_exchange_id`, 0013 the
# stored verdicts, 0014 `tags` and `end_user`.
EXCHANGE_FACT_COLUMNS = (
    "id", "team", "key_fingerprint", "key_last4", "started_at", "ended_at", "ttfb_ms", "ttft_ms",
    "duration_ms", "protocol", "provider", "status", "complete", "model", "model_requested",
    "finish_reason", "usage_input_tokens", "usage_cache_read_input_tokens",
    "usage_cache_creation_input_tokens", "usage_output_tokens", "usage_reasoning_output_tokens",
    "error_type", "error_code", "retry_after_s", "interrupted", "decode_error", "tool_call_count",
    "request_cache_breakpoints", "request_cache_ttl", "request_tool_result_ids", "request_tool_call_ids",
    "request_message_count", "tools_hash", "system_hash", "first_message_hash", "message_hashes",
    "request_body_ref", "price_status", "price_version", "price_reason", "cost_input_pico", "cost_cache_read_pico",
    "cost_cache_write_pico", "cost_output_pico", "cost_total_pico", "rate_input_pico", "rate_cache_read_pico",
    "service_tier", "cost_fee_pico", "warmup", "thread_key", "background_state", "previous_exchange_id",
    "conversation_id", "cache_verdict", "cache_cause", "cache_message_index", "cache_missed_tokens",
    "cache_previous_id", "cache_gap_ms", "tool_problems", "tags", "end_user",
)  # fmt: skip
TOOL_CALL_FACT_COLUMNS = ("exchange_id", "position", "call_id", "name", "status", "status_detail", "valid_json", "kind")


def _facts(name: str, source: Table, columns: tuple[str, ...]) -> Table:
    """A narrow copy of `source`: the same column types (JSON as its text: PostgreSQL then
    sends what it stores rather than rendering JSONB on every scan), its primary key, no
    foreign keys (the triggers delete a copy with its row), and `revision`: on SQLite, the
    value of `fact_revision.n` when the triggers last wrote the row, so a reader that kept
    a copy (analytics/facts_cache.py) fetches only what changed since; NULL on PostgreSQL
    (see `fact_revision`). No other index (reports scan it)."""
    copied = []
    for column_name in columns:
        original = source.c[column_name]
        kind = StoredText() if isinstance(original.type, JSON) else original.type
        copied.append(Column(column_name, kind, primary_key=original.primary_key, nullable=original.nullable))
    copied.append(Column("revision", StoredBigInteger, nullable=True))
    return Table(name, metadata, *copied, Index(f"ix_{name}_revision", "revision"))


exchange_facts = _facts("exchange_facts", exchanges, EXCHANGE_FACT_COLUMNS)
tool_call_facts = _facts("tool_call_facts", tool_calls, TOOL_CALL_FACT_COLUMNS)

# One row: the fact tables' change counter on SQLite. Each trigger that writes a fact row
# adds one to `n` and stamps the row with it; a delete sets `deleted` to its `n` (the rows
# are gone, so a reader that kept a copy compares keys). `token` is made once per store,
# so a copy kept of another store (a file replaced by a new one) is never taken for this
# one's. On PostgreSQL the triggers leave it alone: transactions commit out of the order
# of any counter they take, so "changed after n" cannot be read from it there.
fact_revision = Table(
    "fact_revision",
    metadata,
    Column("id", StoredInteger, primary_key=True, autoincrement=False),
    Column("n", StoredBigInteger, nullable=False),
    Column("deleted", StoredBigInteger, nullable=False),
    Column("token", StoredString(32), nullable=False),
)

# Tombstones (schema 0009): the delete triggers record each fact row they delete, stamped
# like the rows (`revision`: SQLite's `fact_revision.n`, PostgreSQL's transaction id), so a
# copy kept elsewhere (`llmtap lake sync`) can delete what the store no longer holds.
# `position` is NULL for an exchange. `prune --synced` removes the ones its own deletes make.
fact_deletions = Table(
    "fact_deletions",
    metadata,
    Column("table_name", StoredText, nullable=False),
    Column("exchange_id", StoredText, nullable=False),
    Column("position", StoredInteger, nullable=True),
    Column("revision", StoredBigInteger, nullable=False),
    Index("ix_fact_deletions_revision", "revision"),
)
