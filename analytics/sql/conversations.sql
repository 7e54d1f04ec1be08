-- Conversations ranked by cost (SPEC §3, §5): the identity of conversation_ids.sql (given
-- to this query as the CTE `conversation_ids`), one row per conversation with a turn in
-- the since/until window, its sums over every turn (the turns outside the window too: a
-- conversation is billed whole). conversation_id is the first exchange's id; team and
-- model are the first exchange's. cost_usd (pico-dollars here) sums the priced turns and
-- is NULL when none is priced; unpriced counts the turns without a price. Highest cost
-- first, the unpriced after the priced, then by tokens. first_body_ref (the first
-- request's stored body, when bodies were kept) is for the caller, which reads the first
-- prompt of the rows it keeps.
SELECT
    c.conversation_id,
    arg_min(e.team, (e.started_at, e.id)) AS team,
    arg_min(coalesce(e.model, e.model_requested), (e.started_at, e.id)) AS model,
    count(*) AS turns,
    coalesce(sum(e.usage_input_tokens), 0) AS input_tokens,
    coalesce(sum(e.usage_cache_read_input_tokens), 0) AS cache_read_tokens,
    coalesce(sum(e.usage_output_tokens), 0) AS output_tokens,
    sum(e.cost_total_pico) AS cost_usd,
    count(*) FILTER (WHERE e.price_status = 'unpriced') AS unpriced,
    count(*) FILTER (WHERE e.usage_input_tokens IS NULL) AS usage_missing,
    min(e.started_at) AS started_at,
    max(coalesce(e.ended_at, e.started_at)) AS ended_at,
    arg_min(e.request_body_ref, (e.started_at, e.id)) AS first_body_ref,
    arg_min(e.protocol, (e.started_at, e.id)) AS first_protocol
FROM exchanges AS e JOIN conversation_ids AS c USING (id)
GROUP BY c.conversation_id
HAVING count(*) FILTER (
    WHERE ($since IS NULL OR e.started_at >= $since) AND ($until IS NULL OR e.started_at < $until)
) > 0
ORDER BY cost_usd DESC NULLS LAST, input_tokens + output_tokens DESC, started_at, c.conversation_id
LIMIT $top
