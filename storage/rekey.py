"""`llmtap fingerprint rekey`: rows fingerprinted with another secret made the store's, key
by key, for the keys the operator gives (store_secret.py says why the key is needed: a
fingerprint is an HMAC of it, and no fingerprint turns into another without it).

For each key: its fingerprint under the old secret and under the store's. The rows with
the old one (that name the old secret, or no secret: stored before the store kept one)
get the store's fingerprint and name the store's secret; the rows that already had the
store's fingerprint and named no secret now name it (the key proves it). The
conversations those rows were given (`thread_key`, scoped by the fingerprint:
storage/threads.py) are computed again under the new fingerprint: a session from the
row's `client_session_id`, a response chain from the response id that names it. So one
key's session through two proxies is one conversation again. A thread key neither can
say again stays as it was. One transaction per key; running it again changes nothing.

Not responsible for reading keys or printing the key map (the CLI), nor for deciding the
store's secret (store_secret.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine, and_, or_, select, update

from llmtap.storage import threads
from llmtap.storage.schema import exchanges
from llmtap.storage.secrets import KeyFingerprinter


@dataclass(frozen=True)
class Rekeyed:
    last4: str
    old: str  # the key's fingerprint under the old secret
    new: str  # under the store's
    rewritten: int  # rows that had `old` and now have `new`
    confirmed: int  # rows that had `new` and no secret id, and now name the store's


def rekey(engine: Engine, store: KeyFingerprinter, old: KeyFingerprinter, keys: Iterable[str]) -> list[Rekeyed]:
    """Rewrite the rows of each key (each once, in the order given) from `old` to `store`."""
    done = []
    for key in dict.fromkeys(keys):
        with engine.begin() as connection:
            done.append(_one(connection, store, old, key))
    return done


def _one(connection: Connection, store: KeyFingerprinter, old: KeyFingerprinter, key: str) -> Rekeyed:
    ex = exchanges.c
    before, after = old.fingerprint(key), store.fingerprint(key)
    theirs = and_(ex.key_fingerprint == before, or_(ex.key_secret_id.is_(None), ex.key_secret_id == old.secret_id))
    _move_threads(connection, theirs, before, after)
    moved = connection.execute(
        update(exchanges).where(theirs).values(key_fingerprint=after, key_secret_id=store.secret_id)
    ).rowcount
    confirmed = connection.execute(
        update(exchanges)
        .where(ex.key_fingerprint == after, ex.key_secret_id.is_(None))
        .values(key_secret_id=store.secret_id)
    ).rowcount
    return Rekeyed(KeyFingerprinter.last4(key), before, after, int(moved), int(confirmed))


def _move_threads(connection: Connection, rows: Any, before: str, after: str) -> None:
    ex = exchanges.c
    found = connection.execute(
        select(ex.thread_key, ex.client_session_id, ex.response_id, ex.request_previous_response_id).where(
            rows, ex.thread_key.is_not(None)
        )
    ).all()
    groups: dict[str, list[Any]] = {}
    for row in found:
        groups.setdefault(row.thread_key, []).append(row)
    for thread_key, group in groups.items():
        moved = _thread_key(thread_key, group, threads.scope(before, None), threads.scope(after, None))
        if moved is not None and moved != thread_key:
            connection.execute(update(exchanges).where(rows, ex.thread_key == thread_key).values(thread_key=moved))


def _thread_key(key: str, rows: Sequence[Any], before: str, after: str) -> str | None:
    """`key` (made under `before`) made again under `after`, from what its rows hold."""
    if key[0] in (threads.SESSION_PREFIX, threads.SESSION_CHAIN_PREFIX):
        for session in {row.client_session_id for row in rows if row.client_session_id}:
            if threads.session_key(before, session)[1:] == key[1:]:
                return key[0] + threads.session_key(after, session)[1:]
    elif key[0] == threads.CHAIN_PREFIX:
        named = {row.response_id for row in rows} | {row.request_previous_response_id for row in rows}
        for response_id in sorted(r for r in named if r):
            if threads.chain_key(before, response_id) == key:
                return threads.chain_key(after, response_id)
    return None
