"""Settings shared by the commands: from flags, then the environment, then the TOML
config file, then defaults, each with where it came from (`llmtap config` shows them).

The config file (`--config`, `$LLMTAP_CONFIG`, else `~/.llmtap/config.toml` when present)
is checked whole against its schema (cli/config_schema.py) before any command acts on it:
an unknown table or key, or a value of the wrong type, is a one-line usage error naming
the file, the table, the key and the closest known name.

Not responsible for what the commands do with the settings, nor for the tables' meaning.
"""

from __future__ import annotations

import argparse
import os
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llmtap.cli.config_schema import BODY_MODES, ConfigFile, env_var, validate
from llmtap.cli.errors import UsageError
from llmtap.config.lines import key_lines, line_of
from llmtap.config.section import revealed

__all__ = ["BODY_MODES", "Settings", "Sources", "add_common", "load"]


@dataclass
class Sources:
    """Where each setting came from: `flag --db`, `env LLMTAP_DB`, `file PATH:LINE`, `default`."""

    args: argparse.Namespace
    config: ConfigFile
    path: Path | None = None
    lines: dict[tuple[str | int, ...], int] = field(default_factory=dict)
    chosen: dict[str, str] = field(default_factory=dict)  # dotted key -> where its value came from

    def pick(self, path: tuple[str, ...], *, flag: str | None = None, default: Callable[[], Any] | None = None) -> Any:
        """The value of the key at `path`: the flag's (an `args` attribute), else its
        environment variable's (text), else the file's, else `default()` or the schema's."""
        value, source = self.find(path, flag)
        if source == "default" and default is not None:
            value = default()
        self.chosen[".".join(path)] = source
        return value

    def find(self, path: tuple[str, ...], flag: str | None = None) -> tuple[Any, str]:
        if flag is not None and getattr(self.args, flag, None) not in (None, "", []):
            return getattr(self.args, flag), f"flag --{flag.replace('_', '-')}"
        name = env_var(path)
        if name is not None and os.environ.get(name, "").strip():
            return os.environ[name], f"env {name}"
        holder: Any = self.config
        for part in path[:-1]:
            holder = getattr(holder, part)
        if path[-1] in holder.model_fields_set:
            return getattr(holder, path[-1]), self.in_file(path)
        return getattr(holder, path[-1]), "default"

    def in_file(self, path: tuple[str | int, ...]) -> str:
        line = line_of(self.lines, path)
        return f"file {self.path}" + (f":{line}" if line else "")


@dataclass
class Settings:
    db: str
    body_mode: str
    spool_dir: Path
    secret_file: Path
    sources: Sources = field(repr=False)
    key_teams: dict[str, str] = field(default_factory=dict)
    key_tags: dict[str, dict[str, str]] = field(default_factory=dict)  # [tags]: fingerprint -> tags
    price_file: Path | None = None
    auth: dict[str, str] = field(default_factory=dict, repr=False)  # [auth]: team -> proxy password (a secret)
    config: ConfigFile = field(default_factory=ConfigFile)
    config_path: Path | None = None
    provider_files: dict[str, Path] = field(default_factory=dict)  # [[providers]] name -> its price file

    def provider_names(self) -> Any:
        """The provider names and billable hosts with the config's `[[providers]]`
        (protocols.providers.ProviderNames)."""
        from llmtap.protocols.providers import DEFAULT, Configured, ProviderNames

        entries = self.config.providers
        if not entries:
            return DEFAULT
        return ProviderNames([Configured(entry.name, tuple(entry.hosts)) for entry in entries])


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db", metavar="URL", help="SQLAlchemy URL of the store (env LLMTAP_DB; default a SQLite file in ~/.llmtap)"
    )
    parser.add_argument("--config", metavar="FILE", help="TOML config file (env LLMTAP_CONFIG)")


def load(args: argparse.Namespace) -> Settings:
    from llmtap.storage.engine import default_url, home  # sqlalchemy: only when needed

    path, text = config_file(getattr(args, "config", None))
    config = read_config(path, text) if path is not None else ConfigFile()
    sources = Sources(args, config, path, key_lines(text))
    base = home()
    body_mode = sources.pick(("bodies",), flag="bodies", default=lambda: "metadata")
    if body_mode not in BODY_MODES:
        raise UsageError(f"bodies must be one of {', '.join(BODY_MODES)}, not {body_mode!r}")
    prices = sources.pick(("prices",), flag="prices")
    return Settings(
        db=sources.pick(("db",), flag="db", default=default_url),
        body_mode=body_mode,
        spool_dir=Path(sources.pick(("spool",), default=lambda: base / "spool")).expanduser(),
        secret_file=Path(sources.pick(("secret_file",), default=lambda: base / "fingerprint.secret")).expanduser(),
        key_teams=dict(config.teams),
        key_tags={fingerprint: dict(tags) for fingerprint, tags in config.tags.items()},
        auth={team: revealed(password) for team, password in (config.auth or {}).items()},
        price_file=_price_file(prices),
        provider_files={e.name: path for e in config.providers if (path := _price_file(e.prices)) is not None},
        config=config,
        config_path=path,
        sources=sources,
    )


def _price_file(value: str | None) -> Path | None:
    if not value:
        return None
    path = Path(value).expanduser()
    if not path.is_file():
        raise UsageError(f"price file {str(path)!r} does not exist")
    return path


def config_file(flag: str | None) -> tuple[Path | None, str]:
    """The config file in use (the flag's, else `$LLMTAP_CONFIG`, else the home's when it
    is there) and its text; (None, "") without one."""
    from llmtap.storage.engine import home

    explicit = flag or os.environ.get("LLMTAP_CONFIG")
    path = Path(explicit).expanduser() if explicit else home() / "config.toml"
    if not path.exists():
        if explicit:
            raise UsageError(f"config file {str(path)!r} does not exist")
        return None, ""
    try:
        return path, path.read_text()
    except (UnicodeDecodeError, OSError) as exc:
        raise UsageError(f"cannot read config file {str(path)!r}: {exc}") from None


def read_config(path: Path, text: str) -> ConfigFile:
    """`text` (the file at `path`) parsed and checked against the schema."""
    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"cannot read config file {str(path)!r}: {exc}") from None
    return validate(path, table)
