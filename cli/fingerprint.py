"""`llmtap fingerprint`: API keys' fingerprints under the store's secret (SPEC §4; the
design is in storage/store_secret.py). Keys are read from standard input, never from the
command line, where they would land in shell history, and never printed: only their
fingerprints and last four characters.

- `llmtap fingerprint`: one key's `[teams]` entry. Its secret must be the store's, or it
  becomes the store's if the store has none yet, so the entry matches what the proxies store.
- `llmtap fingerprint status`: this process's secret, the store's, and its rows by the
  secret each was fingerprinted with. Exit status 1 when the two secrets differ.
- `llmtap fingerprint rekey --from OLD_SECRET_FILE`: the rows of the keys given (one a line)
  rewritten from the old secret's fingerprints to the store's, and their new `[teams]`
  entries printed. On a store with no recorded secret yet, this process's secret becomes
  the store's: the way on for a store whose rows were fingerprinted with two.

Not responsible for the SQL (storage/store_secret.py, storage/rekey.py).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from llmtap.cli import settings as settings_module
from llmtap.cli.errors import UsageError

if TYPE_CHECKING:
    from llmtap.cli.settings import Settings
    from llmtap.storage.rekey import Rekeyed
    from llmtap.storage.secrets import KeyFingerprinter

ACTIONS = ("status", "rekey")


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "fingerprint",
        help="print an API key's fingerprint (key read from stdin) for the [teams] map; status; rekey",
        description="Without ACTION: the fingerprint of the key on standard input, under the store's "
        "secret, as a [teams] entry. status: this process's fingerprint secret and the store's. "
        "rekey --from FILE: make the rows fingerprinted with the secret in FILE the store's, for "
        "the keys on standard input (one a line), and print their new [teams] entries.",
    )
    parser.add_argument("action", nargs="?", choices=ACTIONS, metavar="ACTION", help="status or rekey")
    parser.add_argument(
        "--from", dest="old_secret", metavar="FILE", help="rekey: the other secret's file (kept on the old machines)"
    )
    settings_module.add_common(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.old_secret and args.action != "rekey":
        raise UsageError("--from goes with `llmtap fingerprint rekey`")
    if args.action == "rekey" and not args.old_secret:
        raise UsageError("rekey needs --from OLD_SECRET_FILE: the secret the rows were fingerprinted with")
    settings = settings_module.load(args)
    if args.action == "status":
        return _status(settings)
    if args.action == "rekey":
        return _rekey(settings, Path(args.old_secret).expanduser())
    return _print_one(settings)


def _print_one(settings: Settings) -> int:
    from llmtap.cli.store import open_store
    from llmtap.storage.store_secret import fingerprinter_for

    if sys.stdin.isatty():
        print("paste the key and press Enter:", file=sys.stderr)
    key = sys.stdin.readline().strip()
    if not key:
        raise UsageError("no key on standard input")
    fingerprinter = fingerprinter_for(open_store(settings), settings.secret_file, by="fingerprint")
    print(_entry(fingerprinter, key, settings.key_teams))
    return 0


def _entry(fingerprinter: KeyFingerprinter, key: str, teams: dict[str, str], was: str | None = None) -> str:
    fingerprint = fingerprinter.fingerprint(key)
    team = teams.get(fingerprint) or (teams.get(was) if was else None) or "TEAM"
    note = f', was "{was}"' if was and was != fingerprint else ""
    return f'"{fingerprint}" = "{_toml(team)}"   # key ending …{fingerprinter.last4(key)}{note}'


def _toml(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').encode("unicode_escape").decode("ascii")


def _status(settings: Settings) -> int:
    from llmtap.cli.store import open_store
    from llmtap.storage import store_secret
    from llmtap.storage.secrets import KeyFingerprinter, load_secret

    state = store_secret.status(open_store(settings))
    try:
        ours: str | None = KeyFingerprinter(load_secret(settings.secret_file)).secret_id
        print(f"this process's secret: {ours} ({settings.secret_file})")
    except (OSError, ValueError):
        ours = None
        print(f"this process's secret: none readable at {settings.secret_file}")
    recorded = state.recorded or {}
    theirs = recorded.get("id")
    if theirs is None:
        print("the store's secret:    none yet (the first process that fingerprints a key adopts its own)")
    else:
        verdict = "matches" if theirs == ours else "differs: " + store_secret.fix(settings.secret_file, str(theirs))
        print(f"the store's secret:    {theirs} (adopted by {recorded.get('by', '?')}); this process's {verdict}")
    for secret_id, rows in sorted(state.rows.items(), key=lambda item: (item[0] is None, str(item[0]))):
        if secret_id is None:
            print(f"rows with a key:       {rows} stored before the store kept its secret (secret unknown)")
        elif secret_id == theirs:
            print(f"rows with a key:       {rows} fingerprinted with the store's secret")
        else:
            print(
                f"rows with a key:       {rows} fingerprinted with secret {secret_id}: "
                "`llmtap fingerprint rekey --from THAT_SECRET_FILE` (the keys on standard input)"
            )
    return 1 if theirs is not None and theirs != ours else 0


def _rekey(settings: Settings, old_file: Path) -> int:
    from llmtap.cli.store import open_store
    from llmtap.storage.rekey import rekey
    from llmtap.storage.secrets import KeyFingerprinter, load_secret
    from llmtap.storage.store_secret import fingerprinter_for

    try:
        old = KeyFingerprinter(load_secret(old_file))
    except FileNotFoundError:
        raise UsageError(f"no fingerprint secret at {old_file}") from None
    except (OSError, ValueError) as exc:
        raise UsageError(
            f"cannot read the fingerprint secret {old_file}: {getattr(exc, 'strerror', None) or exc}"
        ) from None
    engine = open_store(settings)
    store = fingerprinter_for(engine, settings.secret_file, by="rekey", choose=True)
    if old.secret_id == store.secret_id:
        raise UsageError(f"{old_file} holds the store's secret already ({store.secret_id}): nothing to rekey")
    if sys.stdin.isatty():
        print("paste the keys, one a line, then Ctrl-D:", file=sys.stderr)
    keys = [line.strip() for line in sys.stdin if line.strip()]
    done = rekey(engine, store, old, keys)
    for key, result in zip(dict.fromkeys(keys), done, strict=True):
        print(_entry(store, key, settings.key_teams, was=result.old))
    _summary(done, old.secret_id, store.secret_id)
    return 0


def _summary(done: list[Rekeyed], old_id: str, store_id: str) -> None:
    rewritten = sum(result.rewritten for result in done)
    confirmed = sum(result.confirmed for result in done)
    print(
        f"{len(done)} keys: {rewritten} rows rewritten from secret {old_id} to the store's ({store_id}), "
        f"{confirmed} more found to be the store's; put the lines above in the config's [teams] map "
        "in place of the old fingerprints",
        file=sys.stderr,
    )
