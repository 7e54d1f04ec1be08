"""The base of every table's model, and the small types several tables share.

A `Section` is a pydantic model that refuses what it does not know (`extra="forbid"`) and
takes TOML's values as they are (`strict=True`: `"8080"` is not a port, `"yes"` not a
boolean). A field's checks raise ValueError with a predicate about the value (`must be
HOST:PORT, not 'x'`); problems.py puts the file, table and key in front of it.

    class MetricsSection(Section):
        listen: Annotated[str | None, AfterValidator(address)] = None
        teams: Positive = 200          # adding a key is one line

Not responsible for reading a file or for the wording of a problem (problems.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, SecretStr, ValidationError

from llmtap.config.problems import problem, secret_name

__all__ = ["ConfigError", "Env", "Positive", "PositiveNumber", "Section", "parse", "revealed", "secret_name"]


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class ConfigError(ValueError):
    """A table that does not hold: the message is one line naming the table and key."""


@dataclass(frozen=True)
class Env:
    """A field's environment variable (`Annotated[str | None, Env("LLMTAP_DB")]`): it wins
    over the file, a flag wins over it."""

    name: str


def revealed(value: Any) -> Any:
    return value.get_secret_value() if isinstance(value, SecretStr) else value


def parse[S: BaseModel](model: type[S], data: Any, where: tuple[str, ...]) -> S:
    """`data` (a parsed TOML table) as `model`, or ConfigError naming the table `where`
    (("budgets",)) and the key. A `model` instance is taken as it is."""
    if isinstance(data, model):
        return data
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(problem(exc, model, where)) from None


def _positive(value: int | float) -> int | float:
    if value <= 0:
        raise ValueError(f"must be above 0, not {value!r}")
    return value


Positive = Annotated[int, AfterValidator(_positive)]  # a whole number above 0
PositiveNumber = Annotated[float, AfterValidator(_positive)]  # seconds and the like
