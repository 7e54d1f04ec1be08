-- cache.sql over the lake's daily summary (analytics/lake_daily.py: `daily_rows`, the
-- summary's days plus the rows it does not hold, summed alike): the same columns, from
-- the stored verdicts' counts the summary keeps.
SELECT
    $dims
    $daily_tokens
    round(coalesce(sum(cache_read_tokens) / nullif(sum(input_tokens), 0), 0), 4) AS hit_rate,
    sum(cache_misses) AS misses,
    sum(cache_not_cacheable) AS not_cacheable,
    coalesce(sum(cache_missed_tokens), 0) AS missed_tokens,
    CASE WHEN sum(cache_misses) = 0 THEN 0 ELSE sum(cache_extra_cost_pico) END AS extra_cost_usd
FROM daily_rows
$group_by
ORDER BY $order_by
