-- latency.sql over the lake's daily summary (analytics/lake_daily.py): the same columns,
-- the percentiles read off each group's merged histograms, within
-- lake_daily.RELATIVE_ERROR. quantile_cont's rule: the value at position q·(N − 1) of the
-- N values in order, interpolated between the two around it; here each of those two is
-- its bucket's middle ($middle of the bucket number b). The requests and each
-- histogram's entries are rows of one union, so groups (NULLs too) meet in GROUP BY.
WITH entries AS (
    SELECT $names metric, b, sum(n) AS n
    FROM (
        SELECT $dims 'requests' AS metric, 0 AS b, latency_requests AS n FROM daily_rows WHERE latency_requests > 0
        UNION ALL
        SELECT $dims 'ttfb' AS metric, h.b AS b, h.n AS n FROM (SELECT *, unnest(ttfb_hist) AS h FROM daily_rows) AS u
        UNION ALL
        SELECT $dims 'ttft' AS metric, h.b AS b, h.n AS n FROM (SELECT *, unnest(ttft_hist) AS h FROM daily_rows) AS u
        UNION ALL
        SELECT $dims 'total' AS metric, h.b AS b, h.n AS n FROM (SELECT *, unnest(total_hist) AS h FROM daily_rows) AS u
    ) AS parts
    GROUP BY ALL
), ranked AS (
    SELECT *,
        sum(n) OVER (PARTITION BY $names metric ORDER BY b ROWS UNBOUNDED PRECEDING) - n AS before,
        sum(n) OVER (PARTITION BY $names metric) AS total
    FROM entries
    WHERE metric <> 'requests'
), picked AS (
    SELECT $names metric || '_p' || CAST(CAST(q * 100 AS INTEGER) AS VARCHAR) AS metric,
        max(CASE WHEN before <= floor(q * (total - 1)) AND floor(q * (total - 1)) < before + n THEN b END) AS low,
        max(CASE WHEN before <= ceil(q * (total - 1)) AND ceil(q * (total - 1)) < before + n THEN b END) AS high,
        any_value(q * (total - 1) - floor(q * (total - 1))) AS fraction
    FROM ranked, (SELECT CAST(unnest([0.5, 0.95]) AS DOUBLE) AS q) AS quantiles
    GROUP BY ALL
), valued AS (
    SELECT $names metric, $middle_low + fraction * ($middle_high - $middle_low) AS value FROM picked
)
SELECT
    $names
    requests,
    round(ttfb_p50, 1) AS ttfb_p50_ms,
    round(ttfb_p95, 1) AS ttfb_p95_ms,
    round(ttft_p50, 1) AS ttft_p50_ms,
    round(ttft_p95, 1) AS ttft_p95_ms,
    round(total_p50, 1) AS total_p50_ms,
    round(total_p95, 1) AS total_p95_ms
FROM (
    SELECT
        $names
        sum(n) FILTER (WHERE metric = 'requests') AS requests,
        max(value) FILTER (WHERE metric = 'ttfb_p50') AS ttfb_p50,
        max(value) FILTER (WHERE metric = 'ttfb_p95') AS ttfb_p95,
        max(value) FILTER (WHERE metric = 'ttft_p50') AS ttft_p50,
        max(value) FILTER (WHERE metric = 'ttft_p95') AS ttft_p95,
        max(value) FILTER (WHERE metric = 'total_p50') AS total_p50,
        max(value) FILTER (WHERE metric = 'total_p95') AS total_p95
    FROM (
        SELECT $names metric, n, NULL::DOUBLE AS value FROM entries WHERE metric = 'requests'
        UNION ALL
        SELECT $names metric, NULL AS n, value FROM valued
    ) AS both_parts
    $group_by
) AS grouped
WHERE requests > 0
ORDER BY $order_by
