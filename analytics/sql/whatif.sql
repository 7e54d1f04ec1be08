-- What-if pricing (`report whatif`): the recorded exchanges summed per group and, inside
-- a group (the caller adds these grouping columns), per what decides another model's
-- price of one exchange: `bucket`, how many of that model's tier starts the exchange's
-- input exceeds (genai-prices applies a tier to every token of a request whose input is
-- past its start), and `served_tier` (batch, flex, priority: a price variant); and per
-- `actual`: priced, unverified_host (never priced, what-if neither) or other.
-- Python prices each such sub-group once; within one the price is linear in the token
-- counts, so the sum of the parts is the sum of the per-exchange prices.
-- The leaves are what pricing.py bills: uncached input = input less cache reads and
-- writes (never below 0), reasoning at most the output. The cache misses come from
-- cache.sql, run with the same extra grouping columns.
SELECT
    $dims
    count(*) AS requests,
    count(*) FILTER (WHERE usage_input_tokens IS NULL) AS usage_missing,
    count(*) FILTER (WHERE price_status = 'unpriced') AS unpriced,
    coalesce(sum(usage_input_tokens), 0) AS input_tokens,
    coalesce(sum(usage_cache_read_input_tokens), 0) AS cache_read_tokens,
    coalesce(sum(usage_cache_creation_input_tokens), 0) AS cache_write_tokens,
    coalesce(sum(usage_output_tokens), 0) AS output_tokens,
    coalesce(sum(greatest(usage_input_tokens - coalesce(usage_cache_read_input_tokens, 0)
                          - coalesce(usage_cache_creation_input_tokens, 0), 0)), 0) AS uncached_leaf,
    coalesce(sum(coalesce(usage_cache_read_input_tokens, 0)) FILTER (WHERE usage_input_tokens IS NOT NULL), 0)
        AS read_leaf,
    coalesce(sum(coalesce(usage_cache_creation_input_tokens, 0)) FILTER (WHERE usage_input_tokens IS NOT NULL), 0)
        AS write_leaf,
    coalesce(sum(coalesce(usage_output_tokens, 0)) FILTER (WHERE usage_input_tokens IS NOT NULL), 0) AS output_leaf,
    coalesce(sum(least(coalesce(usage_reasoning_output_tokens, 0), coalesce(usage_output_tokens, 0)))
        FILTER (WHERE usage_input_tokens IS NOT NULL), 0) AS reasoning_leaf,
    sum(cost_total_pico) AS cost_usd
FROM exchanges
WHERE ($since IS NULL OR started_at >= $since) AND ($until IS NULL OR started_at < $until)
$group_by
