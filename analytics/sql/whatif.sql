-- What-if pricing (`report whatif`): the recorded exchanges summed per group and, inside
-- a group, per what decides another model's price of one exchange: `bucket`, how many of
-- that model's tier starts the exchange's input exceeds ($bucket: genai-prices applies a
-- tier to every token of a request whose input is past its start), and `served_tier`
-- (batch, flex, priority: a price variant). Python prices each such sub-group once; within
-- one the price is linear in the token counts, so the sum of the parts is the sum of the
-- per-exchange prices. `priced` splits the exchanges that have an actual price from the
-- others, so the comparison is like with like.
-- The leaves are what pricing.py bills: uncached input = input less cache reads and
-- writes (never below 0), reasoning at most the output. The cache misses are the rule of
-- cache_misses.sql (the `cache_misses` CTE; below_minimum rows are no miss):
-- missed_tokens is what a hit would have read, miss_cost_usd (pico-dollars here) what
-- that cost at the actual input rate instead of the cache-read rate.
SELECT
    $names
    served_tier,
    bucket,
    priced,
    count(*) AS requests,
    count(*) FILTER (WHERE usage_input_tokens IS NULL) AS usage_missing,
    count(*) FILTER (WHERE price_status = 'unpriced') AS unpriced,
    coalesce(sum(usage_input_tokens), 0) AS input_tokens,
    coalesce(sum(usage_cache_read_input_tokens), 0) AS cache_read_tokens,
    coalesce(sum(usage_cache_creation_input_tokens), 0) AS cache_write_tokens,
    coalesce(sum(usage_output_tokens), 0) AS output_tokens,
    coalesce(sum(usage_reasoning_output_tokens), 0) AS reasoning_tokens,
    coalesce(sum(uncached_leaf), 0) AS uncached_leaf,
    coalesce(sum(read_leaf), 0) AS read_leaf,
    coalesce(sum(write_leaf), 0) AS write_leaf,
    coalesce(sum(output_leaf), 0) AS output_leaf,
    coalesce(sum(reasoning_leaf), 0) AS reasoning_leaf,
    sum(cost_total_pico) AS cost_usd,
    count(*) FILTER (WHERE missed) AS misses,
    coalesce(sum(missed_tokens) FILTER (WHERE missed), 0) AS missed_tokens,
    sum(miss_cost) FILTER (WHERE missed) AS miss_cost_usd,
    count(*) FILTER (WHERE missed AND miss_cost IS NULL) AS misses_unpriced
FROM (
    SELECT
        $dims
        coalesce(e.service_tier, '') AS served_tier,
        CASE WHEN e.usage_input_tokens IS NOT NULL THEN $bucket END AS bucket,
        coalesce(e.price_status = 'priced', false) AS priced,
        e.usage_input_tokens,
        e.usage_cache_read_input_tokens,
        e.usage_cache_creation_input_tokens,
        e.usage_output_tokens,
        e.usage_reasoning_output_tokens,
        e.price_status,
        e.cost_total_pico,
        greatest(e.usage_input_tokens - coalesce(e.usage_cache_read_input_tokens, 0)
                 - coalesce(e.usage_cache_creation_input_tokens, 0), 0) AS uncached_leaf,
        CASE WHEN e.usage_input_tokens IS NOT NULL THEN coalesce(e.usage_cache_read_input_tokens, 0) END AS read_leaf,
        CASE WHEN e.usage_input_tokens IS NOT NULL THEN coalesce(e.usage_cache_creation_input_tokens, 0) END AS write_leaf,
        CASE WHEN e.usage_input_tokens IS NOT NULL THEN coalesce(e.usage_output_tokens, 0) END AS output_leaf,
        CASE WHEN e.usage_input_tokens IS NOT NULL THEN
            least(coalesce(e.usage_reasoning_output_tokens, 0), coalesce(e.usage_output_tokens, 0)) END AS reasoning_leaf,
        coalesce(m.cause <> 'below_minimum', false) AS missed,
        m.missed_tokens,
        m.extra_cost_usd AS miss_cost
    FROM exchanges AS e
    -- only the columns it adds: the grouping expressions name the exchange's own columns
    LEFT JOIN (SELECT exchange_id, cause, missed_tokens, extra_cost_usd FROM cache_misses) AS m
        ON m.exchange_id = e.id
    WHERE ($since IS NULL OR e.started_at >= $since) AND ($until IS NULL OR e.started_at < $until)
) AS e
GROUP BY ALL
