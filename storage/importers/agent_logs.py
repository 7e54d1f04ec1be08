"""`llmtap import` of the coding agents' own session logs: which files are such logs, their
calls as records, and which of those the store does not hold yet (SPEC §3, §6).

A file is taken as an agent's log by its first line (Claude Code, Codex, Gemini CLI: see
their modules), never by its name alone; a folder given to `import` is searched for them
(`*.jsonl`, and Gemini CLI's older `chats/session-*.json`), at most MAX_FILES.

Each call is counted once: the readers make a streamed message's partial lines and a
resumed session's copies one call (by the log's own id), `Seen` keeps one of each across
the files of an import, and `Fresh` leaves out what the store already holds:
- a call with the provider's id (Claude Code's message id, Codex's response id) is held
  when a stored exchange has that response id and the same input tokens (an id that two
  different requests share, a caching gateway's, leaves the other one in), or came from
  an agent log itself (a log imported again, its message then fuller);
- a call without one (Gemini CLI's) is held when a stored exchange of the same protocol
  and model, with the same input, cached and output tokens, started in the WINDOW before
  the log wrote it; each stored exchange stands for one call at most.
The records' own ids are made of what the log said (`ingest.capture_id`), so the same log
imported twice is the same records too.

Not responsible for reading the logs (the readers), for decoding (the translators, through
`agent_calls.as_http` and `ingest.to_record`), nor for storing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

from llmtap.storage.importers import claude_code, codex_sessions, gemini_chats
from llmtap.storage.importers.agent_calls import LoggedCall, json_lines

MAX_FILES = 100_000
WINDOW = timedelta(minutes=15)
SOURCE = "agent_log"
Reader = Callable[[Any, str], Iterator[tuple[LoggedCall | None, str | None]]]


def reader_for(path: Path) -> Reader | None:
    """The reader of `path` when it is an agent's session log, by its first line."""
    if path.suffix == ".json":
        if path.name.startswith("session-") and path.parent.name == "chats":
            return gemini_chats.read_whole
        return None
    try:
        with open(path, "rb") as handle:
            first = next(iter(json_lines(handle, path.name)), (None, None))[0]
    except OSError:
        return None
    if first is None:
        return None
    readers: tuple[tuple[Callable[[dict[str, Any]], bool], Reader], ...] = (  # the most particular first
        (codex_sessions.looks_like, codex_sessions.read),
        (gemini_chats.looks_like, gemini_chats.read),
        (claude_code.looks_like, claude_code.read),
    )
    return next((read for looks_like, read in readers if looks_like(first)), None)


def expand(paths: list[Path]) -> Iterator[tuple[Path, Path | None]]:
    """The files of `paths`, each with the folder it was found in (or None): a file as it is, a
    folder's candidate session logs in name order (those that are no agent's log are for
    the caller to pass over: a folder holds other JSON Lines files too)."""
    for path in paths:
        if not path.is_dir():
            yield path, None
            continue
        found = 0
        for candidate in sorted(path.rglob("*")):
            if candidate.is_symlink() or not candidate.is_file():
                continue
            if candidate.suffix == ".jsonl" or (candidate.suffix == ".json" and candidate.parent.name == "chats"):
                found += 1
                if found > MAX_FILES:
                    return
                yield candidate, path


class Seen:
    """The calls an import has taken so far, by agent and the log's key (a digest each)."""

    def __init__(self) -> None:
        self._keys: set[bytes] = set()

    def first(self, call: LoggedCall) -> bool:
        """Whether `call` is the first of its key in this import (and, if so, it is noted)."""
        digest = hashlib.blake2b(f"{call.agent}\x1f{call.key}".encode(), digest_size=16).digest()
        if digest in self._keys:
            return False
        self._keys.add(digest)
        return True


class Fresh:
    """Which records of agent-logged calls the store does not hold (see the module's doc)."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self._taken: set[str] = set()  # stored exchanges that already stand for a call

    def new(self, records: list[Any]) -> list[Any]:
        """The records of `records` no stored exchange stands for."""
        if not records:
            return []
        rows = self._stored(records)
        by_id: dict[str, list[dict[str, Any]]] = {}
        by_tokens: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
        for row in rows:
            if row["response_id"]:
                by_id.setdefault(row["response_id"], []).append(row)
            by_tokens.setdefault(_tokens(row), []).append(row)
        out = []
        for record in records:
            if record.exchange.response_id:
                held = self._held_by_id(record, by_id)
            else:
                held = self._held_alike(record, by_tokens)
            if held is None:
                out.append(record)
            else:
                self._taken.add(held)
        return out

    def _stored(self, records: list[Any]) -> list[dict[str, Any]]:
        from sqlalchemy import ColumnElement, or_, select

        from llmtap.storage.schema import exchanges

        ids = sorted({r.exchange.response_id for r in records if r.exchange.response_id})
        alike = [r for r in records if not r.exchange.response_id]
        columns = [
            exchanges.c.id,
            exchanges.c.response_id,
            exchanges.c.protocol,
            exchanges.c.model,
            exchanges.c.model_requested,
            exchanges.c.source,
            exchanges.c.started_at,
            exchanges.c.usage_input_tokens,
            exchanges.c.usage_cache_read_input_tokens,
            exchanges.c.usage_output_tokens,
        ]
        where: list[ColumnElement[bool]] = []
        if ids:
            where.append(exchanges.c.response_id.in_(ids))
        if alike:
            start = min(r.started_at for r in alike) - WINDOW
            end = max(r.started_at for r in alike) + timedelta(minutes=1)
            protocols = sorted({r.exchange.protocol for r in alike})
            inputs = sorted({r.exchange.usage.input_tokens for r in alike if r.exchange.usage is not None})
            where.append(
                exchanges.c.started_at.between(start, end)
                & exchanges.c.protocol.in_(protocols)
                & exchanges.c.usage_input_tokens.in_(inputs)  # only rows that can match: not a busy day's every row
            )
        with self.engine.connect() as connection:
            return [dict(row) for row in connection.execute(select(*columns).where(or_(*where))).mappings()]

    def _held_by_id(self, record: Any, by_id: dict[str, list[dict[str, Any]]]) -> str | None:
        usage = record.exchange.usage
        inputs = usage.input_tokens if usage is not None else None
        for row in by_id.get(record.exchange.response_id, []):
            if row["id"] in self._taken:
                continue
            if row["source"] == SOURCE or row["usage_input_tokens"] == inputs:
                return str(row["id"])
        return None

    def _held_alike(self, record: Any, by_tokens: dict[tuple[Any, ...], list[dict[str, Any]]]) -> str | None:
        from llmtap.storage.export import utc

        ex, usage = record.exchange, record.exchange.usage
        if usage is None:
            return None
        wanted = (usage.input_tokens, usage.cache_read_tokens or 0, usage.output_tokens)
        for row in by_tokens.get(wanted, []):
            if row["id"] in self._taken or row["protocol"] != ex.protocol:
                continue
            started = utc(row["started_at"])
            if started is None or not (record.started_at - WINDOW <= started <= record.started_at):
                continue
            names = {row["model"] or "", row["model_requested"] or ""}
            if any(name == ex.model or name.startswith(ex.model or "\x00") for name in names):
                return str(row["id"])
        return None


def _tokens(row: dict[str, Any]) -> tuple[Any, ...]:
    """A stored row's input, cache-read and output tokens, as `_held_alike` compares them."""
    return (row["usage_input_tokens"], row["usage_cache_read_input_tokens"] or 0, row["usage_output_tokens"])
