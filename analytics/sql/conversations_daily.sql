-- conversations.sql over the lake's daily summary (analytics/lake_daily.py, its
-- CONVERSATION grain): the same columns, in the same types and order. `conversation_rows`
-- holds a conversation's sums by day, `opens` on the day of its first exchange (the one
-- whose id is the conversation's), and `in_window` on the rows of a conversation with a
-- turn in the since/until window (lake_daily.gather_conversations; its rows for the
-- window's partial days carry no sums and no `opens`).
-- Most conversations have one row, the day that opens them, and no other: that row is
-- already their sums, and is ranked as it is. Only the others (a row not opening, a
-- conversation whose first exchange is gone, the exchanges of no conversation) are grouped
-- by conversation: at fleet size a GROUP BY over every conversation's rows was most of
-- the report (20M conversations at 100M exchanges).
-- Ranked on the summary's own types, cast after: casting every row's DECIMAL(38,0) costs to
-- HUGEINT took longer than the rest of the query.
WITH continued AS (
    SELECT DISTINCT conversation_id FROM conversation_rows WHERE opens IS NOT TRUE AND conversation_id IS NOT NULL
),
alone AS (
    SELECT row.* FROM conversation_rows AS row ANTI JOIN continued USING (conversation_id) WHERE row.opens
),
together AS (
    SELECT row.* FROM conversation_rows AS row SEMI JOIN continued USING (conversation_id)
    UNION ALL
    SELECT * FROM conversation_rows WHERE conversation_id IS NULL
)
SELECT
    conversation_id,
    CAST(turns AS BIGINT) AS turns,
    CAST(input_tokens AS HUGEINT) AS input_tokens,
    CAST(cache_read_tokens AS HUGEINT) AS cache_read_tokens,
    CAST(cache_write_tokens AS HUGEINT) AS cache_write_tokens,
    CAST(output_tokens AS HUGEINT) AS output_tokens,
    CAST(cost_usd AS HUGEINT) AS cost_usd,
    CAST(input_cost_usd AS HUGEINT) AS input_cost_usd,
    CAST(cache_read_cost_usd AS HUGEINT) AS cache_read_cost_usd,
    CAST(cache_write_cost_usd AS HUGEINT) AS cache_write_cost_usd,
    CAST(output_cost_usd AS HUGEINT) AS output_cost_usd,
    CAST(fee_cost_usd AS HUGEINT) AS fee_cost_usd,
    CAST(unpriced AS BIGINT) AS unpriced,
    CAST(usage_missing AS BIGINT) AS usage_missing,
    started_at,
    ended_at
FROM (
SELECT * FROM (
SELECT
    conversation_id,
    requests AS turns,
    coalesce(input_tokens, 0) AS input_tokens,
    coalesce(cache_read_tokens, 0) AS cache_read_tokens,
    coalesce(cache_write_tokens, 0) AS cache_write_tokens,
    coalesce(output_tokens, 0) AS output_tokens,
    cost_total_pico AS cost_usd,
    cost_input_pico AS input_cost_usd,
    cost_cache_read_pico AS cache_read_cost_usd,
    cost_cache_write_pico AS cache_write_cost_usd,
    cost_output_pico AS output_cost_usd,
    cost_fee_pico AS fee_cost_usd,
    coalesce(unpriced, 0) AS unpriced,
    coalesce(usage_missing, 0) AS usage_missing,
    first_started_at AS started_at,
    last_ended_at AS ended_at
FROM alone
WHERE in_window
UNION ALL
SELECT
    conversation_id,
    sum(requests) AS turns,
    coalesce(sum(input_tokens), 0) AS input_tokens,
    coalesce(sum(cache_read_tokens), 0) AS cache_read_tokens,
    coalesce(sum(cache_write_tokens), 0) AS cache_write_tokens,
    coalesce(sum(output_tokens), 0) AS output_tokens,
    sum(cost_total_pico) AS cost_usd,
    sum(cost_input_pico) AS input_cost_usd,
    sum(cost_cache_read_pico) AS cache_read_cost_usd,
    sum(cost_cache_write_pico) AS cache_write_cost_usd,
    sum(cost_output_pico) AS output_cost_usd,
    sum(cost_fee_pico) AS fee_cost_usd,
    coalesce(sum(unpriced), 0) AS unpriced,
    coalesce(sum(usage_missing), 0) AS usage_missing,
    min(first_started_at) AS started_at,
    max(last_ended_at) AS ended_at
FROM together
GROUP BY conversation_id
HAVING bool_or(in_window)
) AS found
ORDER BY cost_usd DESC NULLS LAST, input_tokens + output_tokens DESC, started_at, conversation_id
LIMIT $top
) AS ranked
ORDER BY cost_usd DESC NULLS LAST, input_tokens + output_tokens DESC, started_at, conversation_id
