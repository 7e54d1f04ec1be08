"""The config's schema itself: every table refuses what it does not know and takes TOML's
values as they are, and the line scan that `llmtap config` names sources with."""

from __future__ import annotations

import types
from typing import Annotated, Any, Union, get_args, get_origin

import pytest
from pydantic import BaseModel

from llmtap.cli.config_schema import ConfigFile, env_var
from llmtap.config.lines import key_lines, line_of
from llmtap.config.section import ConfigError, parse
from llmtap.lake.settings import LakeSection


def _models(kind: Any, seen: set[type[BaseModel]]) -> set[type[BaseModel]]:
    if isinstance(kind, type) and issubclass(kind, BaseModel):
        if kind not in seen:
            seen.add(kind)
            for field in kind.model_fields.values():
                _models(field.annotation, seen)
    elif get_origin(kind) in (Annotated, Union, types.UnionType, list, dict, tuple):
        for arg in get_args(kind):
            _models(arg, seen)
    return seen


def test_every_table_is_strict_and_closed() -> None:
    models = _models(ConfigFile, set())
    assert len(models) >= 8  # the file, proxy, its reverse entries, metrics, otlp, budgets, limits, lake
    for model in models:
        assert model.model_config.get("strict") is True, model
        # [lake] takes pyiceberg's FileIO properties, and checks their names itself
        assert model.model_config.get("extra") == ("allow" if model is LakeSection else "forbid"), model


def test_lake_refuses_a_name_pyiceberg_does_not_know() -> None:
    assert parse(LakeSection, {"s3.region": "eu-west-1"}, ("lake",)).properties() == {"s3.region": "eu-west-1"}
    with pytest.raises(
        ConfigError, match=r'^\[lake\] "s3\.regoin" is not a known key \(did you mean "s3\.region"\?\)$'
    ):
        parse(LakeSection, {"s3.regoin": "eu-west-1"}, ("lake",))


def test_environment_variables_are_the_schemas() -> None:
    assert env_var(("db",)) == "LLMTAP_DB"
    assert env_var(("proxy", "port")) == "LLMTAP_PORT"
    assert env_var(("secret_file",)) == "LLMTAP_SECRET_FILE" and env_var(("nowhere", "x")) is None


def test_key_lines() -> None:
    text = (
        'db = "x"\n'
        'note = """\n'
        "port = 9\n"  # inside a multi-line string: not a key
        '"""\n'
        "[proxy]\n"
        "port = 1\n"
        "[[proxy.reverse]]\n"
        'provider = "a"\n'
        "[[proxy.reverse]]\n"
        "port = 2\n"
        "[lake]\n"
        '"s3.region" = "x"\n'
        "[budgets.teams]\n"
        "search = { usd = 5 }\n"
    )
    lines = key_lines(text)
    assert lines[("db",)] == 1 and ("port",) not in lines
    assert lines[("proxy", "port")] == 6 and lines[("proxy", "reverse", 1, "port")] == 10
    assert lines[("lake", "s3.region")] == 12
    assert line_of(lines, ("budgets", "teams", "search", "usd")) == 14
