-- cost.sql over the lake's daily summary (analytics/lake_daily.py): the same columns.
SELECT
    $dims
    $daily_tokens
    coalesce(sum(output_tokens), 0) AS output_tokens,
    coalesce(sum(reasoning_tokens), 0) AS reasoning_tokens,
    $cost_parts
    sum(cost_fee_pico) AS fee_cost_usd,
    coalesce(sum(requests) FILTER (WHERE price_status = 'priced'), 0) AS priced,
    coalesce(sum(requests) FILTER (WHERE price_status = 'unpriced'), 0) AS unpriced,
    coalesce(sum(requests) FILTER (WHERE price_reason = 'unverified_host'), 0) AS unverified_host,
    sum(usage_missing) AS usage_missing,
    -- each version once, in order: a histogram's keys, where an ordered DISTINCT aggregate
    -- costs twice the whole query over the summary's rows (0.05 of 0.11 s at 100M)
    CASE WHEN count(price_version) > 0
        THEN array_to_string(list_sort(map_keys(histogram(price_version))), '; ') END AS price_version
FROM daily_rows
$group_by
ORDER BY $order_by
