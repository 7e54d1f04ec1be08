-- Conversations ranked by cost (SPEC §3, §5): the conversation stored with each exchange
-- when it was written (exchanges.conversation_id, storage/verdicts.py), one row per
-- conversation with a turn in the since/until window, its sums over every turn (the turns
-- outside the window too: a conversation is billed whole). cost_usd (pico-dollars here)
-- sums the priced turns and is NULL when none is priced (its parts too); unpriced counts
-- the turns without a price. Highest cost first, the unpriced after the priced, then by
-- tokens. conversation_id is the first exchange's id: that exchange's team, model and
-- body are read after this, for the rows it keeps only (conversation_first.sql), not
-- carried through this GROUP BY over every exchange as string aggregates.
SELECT
    conversation_id,
    count(*) AS turns,
    coalesce(sum(usage_input_tokens), 0) AS input_tokens,
    coalesce(sum(usage_cache_read_input_tokens), 0) AS cache_read_tokens,
    coalesce(sum(usage_cache_creation_input_tokens), 0) AS cache_write_tokens,
    coalesce(sum(usage_output_tokens), 0) AS output_tokens,
    sum(cost_total_pico) AS cost_usd,
    -- its parts, as cost.sql sums them
    sum(cost_input_pico) AS input_cost_usd,
    sum(cost_cache_read_pico) AS cache_read_cost_usd,
    sum(cost_cache_write_pico) AS cache_write_cost_usd,
    sum(cost_output_pico) AS output_cost_usd,
    sum(CASE WHEN cost_total_pico IS NOT NULL THEN coalesce(cost_fee_pico, 0) END) AS fee_cost_usd,
    count(*) FILTER (WHERE price_status = 'unpriced') AS unpriced,
    count(*) FILTER (WHERE usage_input_tokens IS NULL) AS usage_missing,
    min(started_at) AS started_at,
    max(coalesce(ended_at, started_at)) AS ended_at
FROM exchanges
GROUP BY conversation_id
HAVING count(*) FILTER (
    WHERE ($since IS NULL OR started_at >= $since) AND ($until IS NULL OR started_at < $until)
) > 0
ORDER BY cost_usd DESC NULLS LAST, input_tokens + output_tokens DESC, started_at, conversation_id
LIMIT $top
