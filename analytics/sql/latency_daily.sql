-- latency.sql's groups over the lake's daily summary (analytics/lake_daily.py): each
-- group's requests and its merged histograms (every bucket entry of its rows: the caller
-- adds them up and reads the percentiles off them, within lake_daily.RELATIVE_ERROR).
SELECT
    $dims
    sum(latency_requests) AS requests,
    flatten(list(ttfb_hist)) AS ttfb,
    flatten(list(ttft_hist)) AS ttft,
    flatten(list(total_hist)) AS total
FROM daily_rows
WHERE latency_requests > 0
$group_by
ORDER BY $order_by
