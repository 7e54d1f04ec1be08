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
    string_agg(DISTINCT price_version, '; ' ORDER BY price_version) AS price_version
FROM daily_rows
$group_by
ORDER BY $order_by
