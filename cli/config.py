"""`llmtap config`: the effective settings, each with where it came from (`flag --db`,
`env LLMTAP_DB`, `file PATH:LINE`, `default`), secrets masked (proxy passwords, header
values, keys and tokens, the password of every URL); `llmtap config check FILE`: the file
checked against the schema, `FILE: ok` or the one-line error (exit 2).

Every setting of the schema is listed, a table the file leaves out as one line (`metrics`
off). Not responsible for the settings themselves (cli/settings.py, cli/config_schema.py).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

from pydantic import BaseModel, SecretStr

from llmtap.cli import settings as settings_module
from llmtap.cli.config_schema import ConfigFile
from llmtap.cli.errors import UsageError
from llmtap.config.problems import secret_name, toml_key

COLUMNS = ("setting", "value", "source")
MASK = "***"
_TOP = ("db", "bodies", "prices", "spool", "secret_file")  # resolved by cli/settings.py, defaults and all


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "config",
        help="show the effective settings and where each came from; `config check FILE` validates a file",
        description="The settings every command uses (flags, environment, config file, defaults), each with "
        "where it came from; secrets are masked. `llmtap config check FILE` checks a config file.",
    )
    parser.add_argument(
        "--format",
        choices=("table", "json", "jsonl", "csv"),
        default="table",
        help="table: a table for the terminal (default); json: an array of objects; jsonl: an object a line; csv",
    )
    settings_module.add_common(parser)
    actions = parser.add_subparsers(dest="config_command", metavar="ACTION", parser_class=type(parser))
    check = actions.add_parser(
        "check",
        help="check a config file: unknown tables or keys and wrong types are one line, exit 2",
        description="Check a config file against the schema every command reads it with.",
    )
    check.add_argument("file", metavar="FILE", help="the TOML config file to check")
    check.set_defaults(run=run_check)
    parser.set_defaults(run=run)


def run_check(args: argparse.Namespace) -> int:
    path = Path(args.file).expanduser()
    if not path.is_file():
        raise UsageError(f"config file {str(path)!r} does not exist")
    try:
        text = path.read_text()
    except (UnicodeDecodeError, OSError) as exc:
        raise UsageError(f"cannot read config file {str(path)!r}: {exc}") from None
    settings_module.read_config(path, text)
    print(f"{path}: ok")
    return 0


def run(args: argparse.Namespace) -> int:
    from llmtap.analytics import render
    from llmtap.analytics.reports import Table

    settings = settings_module.load(args)
    found = rows(settings, args)
    if args.format == "json":
        sys.stdout.write(render.as_json(Table(columns=list(COLUMNS), rows=found)) + "\n")
    elif args.format == "jsonl":
        sys.stdout.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in found)
    else:
        shown = [{**row, "value": _text(row["value"])} for row in found]
        table = Table(columns=list(COLUMNS), rows=shown)
        if args.format == "csv":
            sys.stdout.write(render.as_csv(table))
        else:
            render.as_rich(table, "llmtap config (effective settings)", render.make_console(), total=False)
    return 0


def rows(settings: settings_module.Settings, args: argparse.Namespace) -> list[dict[str, Any]]:
    """One row per setting: `setting` (dotted, as in the file), `value` (masked), `source`."""
    from llmtap.storage.engine import home

    sources = settings.sources
    config_from = (
        "flag --config" if args.config else "env LLMTAP_CONFIG" if os.environ.get("LLMTAP_CONFIG") else "default"
    )
    found = [
        _row(("config",), str(settings.config_path) if settings.config_path else None, config_from),
        _row(("home",), str(home()), "env LLMTAP_HOME" if os.environ.get("LLMTAP_HOME") else "default"),
    ]
    values = {
        "db": settings.db,
        "bodies": settings.body_mode,
        "prices": str(settings.price_file) if settings.price_file else None,
        "spool": str(settings.spool_dir),
        "secret_file": str(settings.secret_file),
    }
    found += [_row((name,), values[name], sources.chosen[name]) for name in _TOP]
    for name in (name for name in ConfigFile.model_fields if name not in _TOP):  # the tables, and any key added
        found += [_row(path, value, source, named=named) for path, value, source, named in _leaves(settings, (name,))]
    return found


Leaf = tuple[tuple[str, ...], Any, str, bool]  # path, value, source, named by the file


def _leaves(settings: settings_module.Settings, path: tuple[str, ...]) -> Iterator[Leaf]:
    """The settings under `path`, each with its source."""
    value, source = settings.sources.find(path)
    if isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield from _leaves(settings, (*path, name))
        for key, extra in (value.model_extra or {}).items():
            yield (*path, key), extra, settings.sources.in_file((*path, key)), True
    elif isinstance(value, dict) and value:
        yield from _entries(settings, path, value)
    else:
        yield path, value, source, False


def _entries(settings: settings_module.Settings, path: tuple[str, ...], table: dict[str, Any]) -> Iterator[Leaf]:
    for key, item in table.items():
        where = (*path, key)
        if isinstance(item, BaseModel):
            for name in type(item).model_fields:
                yield (*where, name), getattr(item, name), settings.sources.in_file(where), False
        else:
            yield where, item, settings.sources.in_file(where), True


def _row(path: tuple[str, ...], value: Any, source: str, *, named: bool = False) -> dict[str, Any]:
    """`named`: the key is the file's own (a FileIO property, a header), not the schema's:
    one named like a credential is masked whatever its type."""
    if named and value is not None and secret_name(str(path[-1])):
        value = SecretStr(str(value))
    return {"setting": ".".join(toml_key(part) for part in path), "value": _masked(path, value), "source": source}


def _masked(path: tuple[str, ...], value: Any) -> Any:
    from llmtap.storage.errors import mask_passwords, shown_url

    if isinstance(value, SecretStr):
        return MASK
    if isinstance(value, BaseModel):
        return _masked(path, value.model_dump(mode="python"))
    if isinstance(value, dict):
        return {k: _masked((*path, str(k)), v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_masked(path, v) for v in value]
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, str):
        return shown_url(value) if path == ("db",) else mask_passwords(value)
    return value


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
