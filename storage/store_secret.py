"""The store's fingerprint secret (SPEC §4): one key has one fingerprint in one store,
whichever proxy, import or `llmtap fingerprint` saw it.

The design:

- **The secret stays on the machines that record, the store keeps its verifier.** The
  secret is a file (`secret_file` in the config, else `~/.llmtap/fingerprint.secret`,
  0600). The store keeps HMAC-SHA256(secret, a fixed label) in `store_settings` under
  `fingerprint_secret` ({verifier, id: its first 16 hex digits, by: the command that
  adopted it}). Keeping the secret itself in the store would save copying one file, but
  anyone who can read the store (an analyst's database role, a backup, a replica) could
  then fingerprint any key they hold, and so learn whether and by which team a leaked or
  guessed key was used: the fingerprint would be a plain hash. SPEC's "local secret"
  keeps that power with the machines that record. The verifier lets the store tell its
  secret from another and gives nobody the power to fingerprint a key. A fleet
  distributes the one file, as it distributes a CA's key.
- **Every process that fingerprints binds first** (`fingerprinter_for`): `llmtap proxy`,
  the mitmdump script, `llmtap import`, `llmtap fingerprint` (so the key map's entries
  are the store's), `rekey`. If the store has a secret, the process's file must hold that
  secret. A missing or short file is not replaced by a new one, which could only be refused.
  Anything else is `SecretError`: one line naming the file, both secrets' ids and the fix.
  A store without a secret adopts the process's. The first writer wins: an insert, never a
  replace. A process that races it finds the winner's secret and compares.
- **A store from before** (rows, no recorded secret) adopts the first process's secret
  unless its rows show more than one: some rows name a secret id that is not this one, or
  one key (its last four characters) has two fingerprints among rows that name none.
  Then adoption is refused and `llmtap fingerprint rekey` is the way on. Without such
  evidence the first process is taken at its word: rows of keys that no two secrets
  both saw cannot say which secret made them.
- **Each row names its secret** (`exchanges.key_secret_id`). The writer of the process
  that fingerprinted a record stamps it. Records loaded from a file keep what the file
  says. So a spool replayed, or a rejected file imported, after its process took another
  secret is stored as it was, marked (its key is gone: nobody can fingerprint it again),
  and `status` counts it until `rekey --from` that secret's file rewrites it.
- **What can be recomputed**: a fingerprint is an HMAC of the key, so without the key
  nothing turns one secret's fingerprint into another's. `rekey` (rekey.py) takes the
  operator's keys on standard input and rewrites each key's rows, and the conversation
  keys scoped by its old fingerprint. Rows of keys nobody gives keep their old fingerprint
  (`--by key` shows them apart). The config's key map is not rewritten: `rekey` prints
  the new entries.

Not responsible for fingerprinting (secrets.py), the rewrite (rekey.py), or where the
secret file is (the CLI's settings).
"""

from __future__ import annotations

import hmac
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, distinct, func, select
from sqlalchemy.exc import IntegrityError, OperationalError, SQLAlchemyError

from llmtap.storage import store_settings
from llmtap.storage.errors import StoreError
from llmtap.storage.schema import exchanges
from llmtap.storage.secrets import KeyFingerprinter, load_or_create_secret, load_secret

SETTING = "fingerprint_secret"
ADOPT_TRIES = 100  # a racing adopter on SQLite is told "locked" and looks again (each 50 ms)


class SecretError(StoreError):
    """This process cannot fingerprint keys for this store (one line, with the fix)."""


def fingerprinter_for(engine: Engine, path: Path, *, by: str, choose: bool = False) -> KeyFingerprinter:
    """The fingerprinter of the secret in `path`, once it is the store's: the one the store
    recorded, or adopted now (`by`: the command, kept with it). `choose`: adopt it even
    over the evidence of another secret (`rekey`: the operator chose it). Raises
    `SecretError`."""
    try:
        for _ in range(ADOPT_TRIES):
            recorded = store_settings.read(engine, SETTING)
            if recorded is not None:
                return _checked(path, recorded)
            fingerprinter = _own(path)
            if _adopted(engine, fingerprinter, path, by, choose):
                return fingerprinter
    except SQLAlchemyError as exc:
        raise StoreError(f"cannot read the store's fingerprint secret: {_first_line(exc)}") from None
    raise SecretError("another process kept the store busy while this one adopted its fingerprint secret")


@dataclass
class Status:
    """The store's secret (None before any process adopted one) and its rows with a key
    fingerprint, by the id of the secret each names (None: stored before the store kept one)."""

    recorded: dict[str, Any] | None
    rows: dict[str | None, int]


def status(engine: Engine) -> Status:
    ex = exchanges.c
    query = select(ex.key_secret_id, func.count()).where(ex.key_fingerprint.is_not(None)).group_by(ex.key_secret_id)
    with engine.connect() as connection:
        recorded = store_settings.read_in(connection, SETTING)
        rows = {secret_id: int(n) for secret_id, n in connection.execute(query)}
    return Status(recorded, rows)


def fix(path: Path, secret_id: str) -> str:
    return (
        f"copy the store's secret file to {path} from a machine that writes to this store "
        f"(`llmtap fingerprint status` there shows secret {secret_id}), or point secret_file in the "
        "config (or LLMTAP_SECRET_FILE) at such a copy"
    )


def _checked(path: Path, recorded: dict[str, Any]) -> KeyFingerprinter:
    theirs = str(recorded.get("id", "?"))
    try:
        fingerprinter = KeyFingerprinter(load_secret(path))
    except FileNotFoundError:
        raise SecretError(
            f"no fingerprint secret at {path}, and this store's is {theirs}: {fix(path, theirs)}"
        ) from None
    except ValueError:
        raise SecretError(
            f"{path} holds no fingerprint secret; this store's is {theirs}: {fix(path, theirs)}"
        ) from None
    except OSError as exc:
        raise SecretError(f"cannot read the fingerprint secret {path}: {exc.strerror or exc}") from None
    if not hmac.compare_digest(fingerprinter.verifier, str(recorded.get("verifier", ""))):
        raise SecretError(
            f"this store fingerprints keys with secret {theirs}, not with {path}'s ({fingerprinter.secret_id}): "
            f"{fix(path, theirs)}; keep the one there if it fingerprinted rows of this store "
            "(`llmtap fingerprint rekey --from` it makes them the store's)"
        )
    return fingerprinter


def _own(path: Path) -> KeyFingerprinter:
    try:
        return KeyFingerprinter(load_or_create_secret(path))
    except OSError as exc:
        raise SecretError(f"cannot read or make the fingerprint secret {path}: {exc.strerror or exc}") from None


def _adopted(engine: Engine, fingerprinter: KeyFingerprinter, path: Path, by: str, choose: bool) -> bool:
    """Make `fingerprinter`'s secret the store's; False when another process got there
    first (or holds the write lock): the caller reads again."""
    value = {"verifier": fingerprinter.verifier, "id": fingerprinter.secret_id, "by": by}
    try:
        with engine.begin() as connection:
            if store_settings.read_in(connection, SETTING) is not None:
                return False
            if not choose:
                _refuse_if_diverged(connection, fingerprinter, path)
            store_settings.add_in(connection, SETTING, value)
    except IntegrityError:
        return False
    except OperationalError as exc:
        if "locked" not in str(exc.orig):
            raise
        time.sleep(0.05)
        return False
    return True


def _refuse_if_diverged(connection: Connection, fingerprinter: KeyFingerprinter, path: Path) -> None:
    """What the rows of a store without a recorded secret say against adopting this one."""
    ex = exchanges.c
    named = connection.execute(select(ex.key_secret_id).where(ex.key_secret_id.is_not(None)).distinct().limit(3))
    others = sorted(str(secret_id) for secret_id in named.scalars() if secret_id != fingerprinter.secret_id)
    if others:
        raise SecretError(
            f"rows of this store were fingerprinted with secret {others[0]}, not with {path}'s "
            f"({fingerprinter.secret_id}): {fix(path, others[0])}; or make {path}'s the store's with "
            "`llmtap fingerprint rekey --from THAT_SECRET_FILE` (the keys on standard input)"
        )
    fingerprints = func.count(distinct(ex.key_fingerprint))
    shared = connection.execute(
        select(ex.key_last4, fingerprints)
        .where(ex.key_secret_id.is_(None), ex.key_fingerprint.is_not(None), ex.key_last4.is_not(None))
        .where(ex.key_last4 != "")
        .group_by(ex.key_last4)
        .having(fingerprints > 1)
        .limit(1)
    ).first()
    if shared is not None:
        raise SecretError(
            "this store's keys were fingerprinted with more than one secret before it kept one (the key "
            f"ending …{shared[0]} has {shared[1]} fingerprints): make one secret the store's with "
            "`llmtap fingerprint rekey --from OTHER_SECRET_FILE` (the keys on standard input; "
            "README: One fingerprint per store)"
        )


def _first_line(exc: Exception) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
