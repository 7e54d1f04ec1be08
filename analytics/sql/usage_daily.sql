-- usage.sql over the lake's daily summary (analytics/lake_daily.py: `daily_rows`, the
-- summary's days plus the rows it does not hold, summed alike): the same columns.
SELECT
    $dims
    $daily_tokens
    coalesce(sum(uncached_input_tokens), 0) AS uncached_input_tokens,
    coalesce(sum(output_tokens), 0) AS output_tokens,
    coalesce(sum(reasoning_tokens), 0) AS reasoning_tokens,
    sum(usage_missing) AS usage_missing
FROM daily_rows
$group_by
ORDER BY $order_by
