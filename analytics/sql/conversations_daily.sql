-- conversations.sql over the lake's daily summary (analytics/lake_daily.py, its
-- CONVERSATION grain): the same columns, in the same types and order. `conversation_rows`
-- holds a conversation's sums by day, and `in_window` on the rows of a conversation with
-- a turn in the since/until window (lake_daily.gather_conversations).
-- Ranked outside: the sums' names are the summary's columns' too.
SELECT * FROM (
SELECT
    conversation_id,
    CAST(sum(requests) AS BIGINT) AS turns,
    CAST(coalesce(sum(input_tokens), 0) AS HUGEINT) AS input_tokens,
    CAST(coalesce(sum(cache_read_tokens), 0) AS HUGEINT) AS cache_read_tokens,
    CAST(coalesce(sum(cache_write_tokens), 0) AS HUGEINT) AS cache_write_tokens,
    CAST(coalesce(sum(output_tokens), 0) AS HUGEINT) AS output_tokens,
    CAST(sum(cost_total_pico) AS HUGEINT) AS cost_usd,
    CAST(sum(cost_input_pico) AS HUGEINT) AS input_cost_usd,
    CAST(sum(cost_cache_read_pico) AS HUGEINT) AS cache_read_cost_usd,
    CAST(sum(cost_cache_write_pico) AS HUGEINT) AS cache_write_cost_usd,
    CAST(sum(cost_output_pico) AS HUGEINT) AS output_cost_usd,
    CAST(sum(cost_fee_pico) AS HUGEINT) AS fee_cost_usd,
    CAST(coalesce(sum(unpriced), 0) AS BIGINT) AS unpriced,
    CAST(coalesce(sum(usage_missing), 0) AS BIGINT) AS usage_missing,
    min(first_started_at) AS started_at,
    max(last_ended_at) AS ended_at
FROM conversation_rows
GROUP BY conversation_id
HAVING bool_or(in_window)
) AS ranked
ORDER BY cost_usd DESC NULLS LAST, input_tokens + output_tokens DESC, started_at, conversation_id
LIMIT $top
