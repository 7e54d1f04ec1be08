"""`[lake]` of the config file: the warehouse `lake sync` uses when `--warehouse` is not
given, and pyiceberg FileIO properties (`s3.endpoint`, `s3.region`, `s3.access-key-id`,
…), each a text as pyiceberg takes it. A key pyiceberg does not name is refused like any
unknown key, with the closest of its names (where the lake extra is installed).

    [lake]
    warehouse = "s3://analytics/llmtap"
    "s3.endpoint" = "http://127.0.0.1:9000"
    "s3.region" = "us-east-1"

Not responsible for opening the catalog (catalog.py) or for what a property does.
"""

from __future__ import annotations

import re
from functools import cache

from pydantic import ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from llmtap.config.section import Section

_PROPERTY = re.compile(r"[a-z0-9]+(\.[a-z0-9_-]+)+")


@cache
def file_io_properties() -> frozenset[str] | None:
    """The FileIO property names pyiceberg's own `pyiceberg.io` declares (imported only
    when a `[lake]` table has one: pyiceberg takes a fifth of a second to import); None
    without the lake extra, where the names go unchecked (a shared config file must not
    stop the proxy on a node without it; `llmtap lake` there names the extra)."""
    try:
        from pyiceberg import io
    except ImportError:
        return None

    names = {value for name, value in vars(io).items() if name.isupper() and isinstance(value, str)}
    properties = {n for n in names if _PROPERTY.fullmatch(n) and not n.startswith("pyiceberg.")}
    return frozenset(properties | {"py-io-impl"})


class LakeSection(Section):
    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, str] = Field(init=False)  # the FileIO properties, texts as pyiceberg reads them

    warehouse: str | None = None

    @model_validator(mode="after")
    def _known_properties(self) -> LakeSection:
        extra = self.model_extra or {}
        known = file_io_properties() if extra else None
        if known is not None:
            for name in extra:
                if name not in known:
                    raise PydanticCustomError(
                        "unknown_key", "not a FileIO property", {"key": name, "known": sorted(known | {"warehouse"})}
                    )
        return self

    def properties(self) -> dict[str, str]:
        """The FileIO properties, for pyiceberg and DuckDB."""
        return dict(self.model_extra or {})
