-- cost_footer.sql over the lake's daily summary (analytics/lake_daily.py): the same rows.
SELECT
    coalesce(price_status, 'unpriced') AS price_status,
    price_reason,
    coalesce(model, model_requested, '(unknown)') AS model,
    price_version,
    sum(requests) AS requests,
    coalesce(sum(input_tokens), 0) AS input_tokens,
    coalesce(sum(output_tokens), 0) AS output_tokens
FROM daily_rows
GROUP BY ALL
ORDER BY requests DESC, model, price_version
