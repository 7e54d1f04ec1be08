-- errors.sql over the lake's daily summary (analytics/lake_daily.py): the same columns.
SELECT
    $dims
    sum(requests) AS requests,
    sum(errors) AS errors,
    round(sum(errors) / sum(requests), 4) AS error_rate,
    sum(rate_limited) AS rate_limited,
    sum(server_errors) AS server_errors,
    sum(overloaded) AS overloaded,
    sum(stream_errors) AS stream_errors,
    sum(interrupted) AS interrupted,
    sum(decode_errors) AS decode_errors,
    max(retry_after_max_s) AS retry_after_max_s,
    round(sum(retry_after_sum_s) / nullif(sum(retry_after_count), 0), 3) AS retry_after_avg_s
FROM daily_rows
$group_by
ORDER BY $order_by
