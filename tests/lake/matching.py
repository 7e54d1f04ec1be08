"""For the lake readers' tests: a report over the lake equals the same report over the
store, row for row and column for column, except the latency percentiles, which a lake's
daily summary reads off log-spaced histograms: each within analytics/lake_daily.py's
RELATIVE_ERROR of the exact one (plus the 0.05 ms each side rounds to).

Not responsible for making the lakes (read_lake.py) or for choosing the reports.
"""

from __future__ import annotations

from typing import Any

from llmtap.analytics.lake_daily import RELATIVE_ERROR

PERCENTILES = frozenset(f"{m}_p{q}_ms" for m in ("ttfb", "ttft", "total") for q in (50, 95))
ROUNDING = 0.1  # both sides round to 0.1 ms


def close(got: float | None, want: float | None) -> bool:
    if got is None or want is None:
        return got is None and want is None
    return abs(got - want) <= RELATIVE_ERROR * abs(want) + ROUNDING


def assert_same(got: list[dict[str, Any]], want: list[dict[str, Any]], what: object = "") -> None:
    """`got` (over the lake) is `want` (over the store), percentiles within the bound."""
    if got == want:
        return
    assert len(got) == len(want), what
    for mine, theirs in zip(got, want, strict=True):
        assert mine.keys() == theirs.keys(), what
        exact = {k: v for k, v in mine.items() if k not in PERCENTILES}
        assert exact == {k: v for k, v in theirs.items() if k not in PERCENTILES}, what
        for name in PERCENTILES & mine.keys():
            assert close(mine[name], theirs[name]), (what, name, mine[name], theirs[name])
