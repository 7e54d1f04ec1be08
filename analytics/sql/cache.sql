-- Prompt-cache efficiency per group: hit rate = cache_read / input (SPEC §5), and the
-- misses with what they cost. A miss is the rule of cache_misses.sql (which also names
-- each miss's cause, for --list): a request continuing the turn before it — the exchange
-- whose response it names (previous_exchange_id, a Responses follow-up), else the previous
-- request of its line: one thread_key (session or response chain; else one key, else
-- team), one model, the same first message, and without a thread_key at most one hour
-- after the previous request ended (the identity of conversation_ids.sql); error
-- responses and exchanges without usage take no part — that reads under 5% of the
-- previous request's input from cache.
-- A would-be miss whose previous request is under the model's minimum cacheable length
-- could not have read anything: it is counted apart as not_cacheable and is no miss.
-- missed_tokens: what a hit would have read; extra_cost_usd (pico-dollars here): those
-- tokens at the input rate instead of the cache-read rate, 0 without misses, NULL when
-- the group has misses but none of them has a price.
-- One pass over the store: the previous turn comes from a window over every exchange,
-- and the since/until window applies afterwards (the previous turn may be older).
WITH turns AS (
    SELECT
        $dims
        started_at,
        usage_input_tokens,
        usage_cache_read_input_tokens,
        usage_cache_creation_input_tokens,
        rate_input_pico,
        rate_cache_read_pico,
        minimum,
        threaded,
        CASE WHEN NOT takes_part THEN NULL WHEN named IS NULL THEN lag(usage_input_tokens) OVER w
             ELSE named_input END AS prev_input,
        CASE WHEN NOT takes_part THEN NULL WHEN named IS NULL THEN epoch(started_at) - lag(end_s) OVER w
             ELSE epoch(started_at) - named_end END AS gap_s
    FROM (
        -- what the window carries is worked out before it, as numbers and booleans: the
        -- strings it would otherwise carry through its sort (thread_key, a model) cost more
        SELECT e.*,
            first_message_hash IS NOT NULL AND usage_input_tokens IS NOT NULL
                AND coalesce(status, 0) < 400 AS takes_part,
            thread_key IS NOT NULL AS threaded,  -- a session or chain goes on after any gap
            -- one 64-bit key per line of a conversation (see cache_misses.sql); the others
            -- share one partition. A thread_key (`s…`, `c…`, `r…`) never equals a key
            -- fingerprint or `team:…`.
            CASE WHEN first_message_hash IS NOT NULL AND usage_input_tokens IS NOT NULL
                      AND coalesce(status, 0) < 400 THEN
                hash(coalesce(thread_key, key_fingerprint, 'team:' || team), e.model, first_message_hash)
            END AS line,
            e.previous_exchange_id AS named,  -- a follow-up's turn before it: the one it names
            n.named_input,
            n.named_end,
            epoch(coalesce(ended_at, started_at)) AS end_s,
            -- the model's minimum cacheable length: one partition is one model, so the
            -- previous request's minimum is this one's; looked up once per distinct model
            m.minimum
        FROM exchanges AS e
        LEFT JOIN (
            SELECT served_model, $minimum_case AS minimum
            FROM (SELECT DISTINCT model AS served_model FROM exchanges)
        ) AS m ON m.served_model = e.model
        -- the exchanges a follow-up may name: those that take part
        LEFT JOIN (
            SELECT id AS named_id, usage_input_tokens AS named_input, epoch(coalesce(ended_at, started_at)) AS named_end
            FROM exchanges
            WHERE first_message_hash IS NOT NULL AND usage_input_tokens IS NOT NULL AND coalesce(status, 0) < 400
        ) AS n ON n.named_id = e.previous_exchange_id
    ) AS e
    WINDOW w AS (PARTITION BY line ORDER BY started_at, id)
),
scored AS (
    SELECT *,
        candidate AND NOT coalesce(under_minimum, false) AS missed,
        candidate AND coalesce(under_minimum, false) AS not_cacheable
    FROM (
        SELECT turns.*,
            prev_input > 0 AND (threaded OR gap_s <= 3600) AND usage_cache_read_input_tokens < 0.05 * prev_input AS candidate,
            greatest(least(prev_input, usage_input_tokens) - usage_cache_read_input_tokens, 0) AS would_read,
            prev_input < minimum AS under_minimum
        FROM turns
        WHERE ($since IS NULL OR started_at >= $since) AND ($until IS NULL OR started_at < $until)
    ) AS t
)
SELECT
    $names
    count(*) AS requests,
    coalesce(sum(usage_input_tokens), 0) AS input_tokens,
    coalesce(sum(usage_cache_read_input_tokens), 0) AS cache_read_tokens,
    coalesce(sum(usage_cache_creation_input_tokens), 0) AS cache_write_tokens,
    round(coalesce(sum(usage_cache_read_input_tokens) / nullif(sum(usage_input_tokens), 0), 0), 4) AS hit_rate,
    count(*) FILTER (WHERE missed) AS misses,
    count(*) FILTER (WHERE not_cacheable) AS not_cacheable,
    coalesce(sum(would_read) FILTER (WHERE missed), 0) AS missed_tokens,
    CASE WHEN count(*) FILTER (WHERE missed) = 0 THEN 0 ELSE
        -- (greatest() skips NULLs in DuckDB, so the unpriced case is spelled out)
        sum(CASE WHEN rate_input_pico IS NOT NULL THEN
                would_read * greatest(rate_input_pico - coalesce(rate_cache_read_pico, 0), 0) END)
            FILTER (WHERE missed)
    END AS extra_cost_usd
FROM scored
$group_by
ORDER BY $order_by
