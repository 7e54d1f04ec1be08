-- latency.sql's groups over the lake's daily summary (analytics/lake_daily.py): each
-- group's requests and its merged histograms (a list of {b, n}, each bucket once, summed
-- over the group's summary rows): the caller reads the percentiles off them, within
-- lake_daily.RELATIVE_ERROR. One pass: the requests and each histogram's entries as
-- rows of one union, so groups (NULLs too) are matched by GROUP BY, not by a join.
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
)
SELECT
    $names
    sum(n) FILTER (WHERE metric = 'requests') AS requests,
    list({'b': b, 'n': n}) FILTER (WHERE metric = 'ttfb') AS ttfb,
    list({'b': b, 'n': n}) FILTER (WHERE metric = 'ttft') AS ttft,
    list({'b': b, 'n': n}) FILTER (WHERE metric = 'total') AS total
FROM entries
$group_by
HAVING sum(n) FILTER (WHERE metric = 'requests') > 0
ORDER BY $order_by
