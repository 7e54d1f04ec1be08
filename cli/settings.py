"""Settings shared by the commands: from flags, then the environment, then the TOML
config file, then defaults.

Config file (`--config`, `$LLMTAP_CONFIG`, else `~/.llmtap/config.toml` when present):

    db = "postgresql://llmtap@db.internal/llmtap"
    bodies = "metadata"          # none | metadata | full
    prices = "~/.llmtap/prices.toml"   # local prices that override or add models
    spool = "/var/lib/llmtap/spool"
    secret_file = "/etc/llmtap/fingerprint.secret"   # the store's key fingerprint secret, the same file
                                 # on every machine of a store (env LLMTAP_SECRET_FILE; default ~/.llmtap/…)
    [teams]                      # key fingerprint (see `llmtap fingerprint`) -> team
    "9f2c…" = "search"
    [auth]                       # team -> proxy password: `llmtap proxy` refuses (407) any other
    search = "a long random password"   # clients: HTTPS_PROXY=http://search:PASSWORD@host:8080

Not responsible for what the commands do with them.
"""

from __future__ import annotations

import argparse
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llmtap.cli.errors import UsageError

BODY_MODES = ("none", "metadata", "full")


@dataclass
class Settings:
    db: str
    body_mode: str
    spool_dir: Path
    secret_file: Path
    key_teams: dict[str, str] = field(default_factory=dict)
    price_file: Path | None = None
    auth: dict[str, str] = field(default_factory=dict, repr=False)  # [auth]: team -> proxy password (a secret)
    config: dict[str, Any] = field(default_factory=dict)
    config_path: Path | None = None


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db", metavar="URL", help="SQLAlchemy URL of the store (env LLMTAP_DB; default a SQLite file in ~/.llmtap)"
    )
    parser.add_argument("--config", metavar="FILE", help="TOML config file (env LLMTAP_CONFIG)")


def load(args: argparse.Namespace) -> Settings:
    from llmtap.storage.engine import default_url, home  # sqlalchemy: only when needed

    path, config = _config(getattr(args, "config", None))
    body_mode = getattr(args, "bodies", None) or os.environ.get("LLMTAP_BODIES") or config.get("bodies") or "metadata"
    if body_mode not in BODY_MODES:
        raise UsageError(f"bodies must be one of {', '.join(BODY_MODES)}, not {body_mode!r}")
    teams = config.get("teams", {})
    if not isinstance(teams, dict) or not all(isinstance(v, str) for v in teams.values()):
        raise UsageError(f"{path}: [teams] must map key fingerprints to team names")
    base = home()
    return Settings(
        db=getattr(args, "db", None) or os.environ.get("LLMTAP_DB") or config.get("db") or default_url(),
        body_mode=body_mode,
        spool_dir=Path(config.get("spool") or os.environ.get("LLMTAP_SPOOL") or base / "spool").expanduser(),
        secret_file=_secret_file(path, config.get("secret_file"), base),
        key_teams=dict(teams),
        auth=_auth(path, config.get("auth")),
        price_file=_price_file(
            getattr(args, "prices", None) or os.environ.get("LLMTAP_PRICES") or config.get("prices")
        ),
        config=config,
        config_path=path,
    )


def _auth(path: Path | None, table: Any) -> dict[str, str]:
    """`[auth]`: each team's proxy password. A team is a Basic user name (no `:`); the
    passwords are never echoed, not even in an error."""
    if table is None:
        return {}
    if not isinstance(table, dict) or not table:
        raise UsageError(f"{path}: [auth] must map team names to their proxy passwords")
    for team, password in table.items():
        if not team.strip() or ":" in team or not team.isprintable():
            raise UsageError(f"{path}: [auth] team {team!r}: a name without ':' or control characters")
        if not isinstance(password, str) or not password:
            raise UsageError(f"{path}: [auth] team {team!r}: its password must be a non-empty string")
    return dict(table)


def _secret_file(path: Path | None, value: Any, base: Path) -> Path:
    """The fingerprint secret's file: one per store, the same on every machine that writes
    to it (storage/store_secret.py)."""
    value = os.environ.get("LLMTAP_SECRET_FILE") or value
    if value is not None and not isinstance(value, str):
        raise UsageError(f"{path}: secret_file must be a path (a string)")
    return Path(value or base / "fingerprint.secret").expanduser()


def _price_file(value: str | None) -> Path | None:
    if not value:
        return None
    path = Path(value).expanduser()
    if not path.is_file():
        raise UsageError(f"price file {str(path)!r} does not exist")
    return path


def _config(flag: str | None) -> tuple[Path | None, dict[str, Any]]:
    from llmtap.storage.engine import home

    explicit = flag or os.environ.get("LLMTAP_CONFIG")
    path = Path(explicit).expanduser() if explicit else home() / "config.toml"
    if not path.exists():
        if explicit:
            raise UsageError(f"config file {str(path)!r} does not exist")
        return None, {}
    try:
        return path, tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, OSError) as exc:
        raise UsageError(f"cannot read config file {str(path)!r}: {exc}") from None
