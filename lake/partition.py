"""Day partitions without `pyiceberg-core`: pyiceberg 0.12 computes a `day` partition of
Arrow data through its optional Rust extension (`pyiceberg[pyiceberg-core]`), which this
install does not carry. When it is missing, `DayTransform.pyarrow_transform` is given the
same arithmetic in pyarrow: whole days since 1970-01-01 UTC (floor), as int32, the value
the Iceberg spec defines for `day(ts)`. With the extension installed, it is left alone.

Not responsible for the tables' partition specs (schema.py) or for writing (sync.py).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]
from pyiceberg.transforms import DayTransform
from pyiceberg.types import DateType, IcebergType, TimestampType, TimestamptzType

_MICROS_PER_DAY = 86_400_000_000


def _days(source: IcebergType) -> Callable[[pa.Array], pa.Array]:
    if isinstance(source, DateType):
        return lambda array: pc.cast(array, pa.int32())
    if not isinstance(source, (TimestampType, TimestamptzType)):
        raise TypeError(f"day partitions of {source} are not supported")

    def transform(array: pa.Array) -> pa.Array:
        unit = pa.timestamp("us", tz="UTC") if array.type.tz else pa.timestamp("us")
        micros = pc.cast(pc.cast(array, unit), pa.int64())
        return pc.cast(pc.floor(pc.divide(pc.cast(micros, pa.float64()), _MICROS_PER_DAY)), pa.int32())

    return transform


def install() -> None:
    """Give DayTransform a pyarrow transform unless pyiceberg-core provides one."""
    if importlib.util.find_spec("pyiceberg_core") is None:
        setattr(DayTransform, "pyarrow_transform", lambda self, source: _days(source))  # noqa: B010
