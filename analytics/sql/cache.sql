-- Prompt-cache efficiency per group: hit rate = cache_read / input (SPEC §5), and the
-- misses with what they cost, from the verdicts stored with each exchange when it was
-- written (storage/verdicts.py, by the rules of protocols/rules.py): cache_verdict
-- `miss`, and apart `not_cacheable` (the previous request was under the model's minimum
-- cacheable length: it could not have read anything, and is no miss).
-- missed_tokens: what a hit would have read; extra_cost_usd (pico-dollars here): those
-- tokens at the input rate instead of the cache-read rate, 0 without misses, NULL when
-- the group has misses but none of them has a price. A plain GROUP BY: no window, no
-- read outside --since/--until.
SELECT
    $dims
    count(*) AS requests,
    coalesce(sum(usage_input_tokens), 0) AS input_tokens,
    coalesce(sum(usage_cache_read_input_tokens), 0) AS cache_read_tokens,
    coalesce(sum(usage_cache_creation_input_tokens), 0) AS cache_write_tokens,
    round(coalesce(sum(usage_cache_read_input_tokens) / nullif(sum(usage_input_tokens), 0), 0), 4) AS hit_rate,
    count(*) FILTER (WHERE cache_verdict = 'miss') AS misses,
    count(*) FILTER (WHERE cache_verdict = 'not_cacheable') AS not_cacheable,
    coalesce(sum(cache_missed_tokens) FILTER (WHERE cache_verdict = 'miss'), 0) AS missed_tokens,
    CASE WHEN count(*) FILTER (WHERE cache_verdict = 'miss') = 0 THEN 0 ELSE
        -- (greatest() skips NULLs in DuckDB, so the unpriced case is spelled out)
        sum(CASE WHEN rate_input_pico IS NOT NULL THEN
                cache_missed_tokens * greatest(rate_input_pico - coalesce(rate_cache_read_pico, 0), 0) END)
            FILTER (WHERE cache_verdict = 'miss')
    END AS extra_cost_usd
FROM exchanges
WHERE ($since IS NULL OR started_at >= $since) AND ($until IS NULL OR started_at < $until)
$group_by
ORDER BY $order_by
