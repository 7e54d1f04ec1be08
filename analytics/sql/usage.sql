-- Normalized token usage per group. input_tokens includes cached reads and writes;
-- output_tokens includes reasoning (SPEC §2). Exchanges without usage are counted in
-- usage_missing and add nothing to the sums.
SELECT
    $dims
    count(*) AS requests,
    coalesce(sum(usage_input_tokens), 0) AS input_tokens,
    coalesce(sum(usage_cache_read_input_tokens), 0) AS cache_read_tokens,
    coalesce(sum(usage_cache_creation_input_tokens), 0) AS cache_write_tokens,
    coalesce(sum(usage_input_tokens - usage_cache_read_input_tokens - usage_cache_creation_input_tokens), 0)
        AS uncached_input_tokens,
    coalesce(sum(usage_output_tokens), 0) AS output_tokens,
    coalesce(sum(usage_reasoning_output_tokens), 0) AS reasoning_tokens,
    count(*) FILTER (WHERE usage_input_tokens IS NULL) AS usage_missing
FROM exchanges
WHERE ($since IS NULL OR started_at >= $since) AND ($until IS NULL OR started_at < $until)
$group_by
ORDER BY $order_by
