-- Prompt-cache efficiency per group: hit rate = cache_read / input (SPEC §5), and the
-- misses of `cache_misses.sql` (given to this query as the CTE `cache_misses`) with their cost.
SELECT
    $dims
    count(*) AS requests,
    coalesce(sum(usage_input_tokens), 0) AS input_tokens,
    coalesce(sum(usage_cache_read_input_tokens), 0) AS cache_read_tokens,
    coalesce(sum(usage_cache_creation_input_tokens), 0) AS cache_write_tokens,
    round(coalesce(sum(usage_cache_read_input_tokens) / nullif(sum(usage_input_tokens), 0), 0), 4) AS hit_rate,
    count(m.exchange_id) AS misses,
    coalesce(sum(m.missed_tokens), 0) AS missed_tokens,
    coalesce(sum(m.extra_cost_usd), 0) AS extra_cost_usd
FROM exchanges
LEFT JOIN (SELECT exchange_id, missed_tokens, extra_cost_usd FROM cache_misses) AS m
    ON m.exchange_id = exchanges.id
WHERE ($since IS NULL OR started_at >= $since) AND ($until IS NULL OR started_at < $until)
$group_by
ORDER BY $order_by
