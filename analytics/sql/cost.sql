-- Cost per group in integer pico-dollars (1e-12 USD; the caller turns them into exact
-- decimals). Exchanges without a price are `unpriced` and exchanges without usage are
-- `usage_missing`: both are counted, neither is priced as zero. The costs are the sums
-- over the priced exchanges, and NULL (unknown, not $0) when none of the group is priced.
SELECT
    $dims
    count(*) AS requests,
    coalesce(sum(usage_input_tokens), 0) AS input_tokens,
    coalesce(sum(usage_cache_read_input_tokens), 0) AS cache_read_tokens,
    coalesce(sum(usage_cache_creation_input_tokens), 0) AS cache_write_tokens,
    coalesce(sum(usage_output_tokens), 0) AS output_tokens,
    coalesce(sum(usage_reasoning_output_tokens), 0) AS reasoning_tokens,
    $cost_parts
    -- per-use fees of server tools (web search, …); rows priced before fees were kept add 0
    sum(CASE WHEN cost_total_pico IS NOT NULL THEN coalesce(cost_fee_pico, 0) END) AS fee_cost_usd,
    count(*) FILTER (WHERE price_status = 'priced') AS priced,
    count(*) FILTER (WHERE price_status = 'unpriced') AS unpriced,
    -- of those, the ones whose host was neither a provider's nor a configured upstream
    count(*) FILTER (WHERE price_reason = 'unverified_host') AS unverified_host,
    count(*) FILTER (WHERE usage_input_tokens IS NULL) AS usage_missing,
    -- each version once, in order: a histogram's keys, where an ordered DISTINCT aggregate
    -- costs twice the whole query over the summary's rows (0.05 of 0.11 s at 100M)
    CASE WHEN count(price_version) > 0
        THEN array_to_string(list_sort(map_keys(histogram(price_version))), '; ') END AS price_version
FROM exchanges
WHERE ($since IS NULL OR started_at >= $since) AND ($until IS NULL OR started_at < $until)
$group_by
ORDER BY $order_by
