-- TEST ORACLE (tests/oracles/__init__.py): the window query the reports ran before the
-- verdicts were stored; the stored verdicts must equal what it decides. The rules
-- constants come from protocols/rules.py (placeholders in double braces).
-- Prompt-cache misses (SPEC §5). A request is compared with the turn before it: the
-- exchange whose response it names (previous_exchange_id: a Responses follow-up, over HTTP
-- or WebSocket, set when it was written, storage/threads.py), else the previous request of
-- its line: the requests of one conversation (conversation_ids.sql) that share model and
-- first message. With a thread_key (a client's session, a response chain) the line is
-- (thread_key, model, first message), at any gap: a session's main thread, its subagents
-- and its side calls are lines of their own, and two sessions never share one. A
-- follow-up extends the prefix of the response it names: its tools_hash and system_hash
-- are those of what it stands on (protocols/prefix.py), and its messages are never
-- compared, nor any of a chain's (`c…`, `r…`: the server holds the history, the body
-- only what is new: no message_edited). A follow-up that names a response not taking part
-- here (a warm-up with no messages, an error) has no turn before it. Without a thread_key,
-- it is the prefix rule's run: one key (else team), model and first message, each at most
-- one hour after the one before it ended. The first request of a line is never a miss
-- (so neither is a conversation's first). A request that continues a line yet reads
-- (almost) nothing from cache — under 5% of the previous request's input — is a miss.
-- One whose previous request is under the model's minimum cacheable length
-- could not have read anything whatever else changed: it is `not_cacheable`, listed with
-- cause below_minimum, missed_tokens and extra_cost_usd 0 (it is no miss that costs
-- money; `report cache` counts it apart). Any other miss's cause is the first that
-- applies, in this order: tools_changed, system_changed,
-- message_edited (message_index: the first message that differs, 0-based, system prompt
-- excluded, among the messages both requests have: a request whose messages are the
-- start of the earlier one's, or continue them, edited none), ttl_expired (gap since the
-- previous request ended beyond its TTL: 5 minutes,
-- 1 hour or 24 hours where asked), no_breakpoint (an Anthropic request, or the one before
-- it, without cache_control); else unexplained. missed_tokens is what a hit would have
-- read (the previous request's input, less what was read); extra_cost_usd (pico-dollars
-- here) is what those tokens cost at the input rate instead of the cache-read rate, NULL
-- (unknown, not $0) when the model has no price.
WITH {{minimums}},
base AS (
    SELECT id, team, model, protocol, started_at, coalesce(ended_at, started_at) AS ended,
           tools_hash, system_hash, message_hashes, request_cache_breakpoints AS breakpoints,
           request_cache_ttl AS ttl, usage_input_tokens AS input_tokens,
           usage_cache_read_input_tokens AS cache_read, rate_input_pico, rate_cache_read_pico,
           -- One 64-bit key per line: sorting on it costs a fraction of sorting on three
           -- strings. (A collision is as unlikely as one of first_message_hash, itself a
           -- 64-bit digest; a thread_key, `s…` or `r…`, never equals a key fingerprint.)
           hash(coalesce(thread_key, key_fingerprint, 'team:' || team), model, first_message_hash) AS conversation,
           previous_exchange_id AS named,
           thread_key IS NOT NULL AS threaded,
           coalesce(left(thread_key, 1) IN {{chained}}, false) AS chained
    FROM exchanges
    WHERE first_message_hash IS NOT NULL AND usage_input_tokens IS NOT NULL
      AND coalesce(status, 0) < {{error_status}}
),
-- the turn before each request: the one it names, else its line's previous
seq AS (
    SELECT b.*,
        CASE WHEN b.named IS NULL THEN lag(b.id) OVER w ELSE p.id END AS prev_id,
        CASE WHEN b.named IS NULL THEN lag(b.ended) OVER w ELSE p.ended END AS prev_end,
        CASE WHEN b.named IS NULL THEN lag(b.input_tokens) OVER w ELSE p.input_tokens END AS prev_input,
        CASE WHEN b.named IS NULL THEN lag(b.tools_hash) OVER w ELSE p.tools_hash END AS prev_tools,
        CASE WHEN b.named IS NULL THEN lag(b.system_hash) OVER w ELSE p.system_hash END AS prev_system,
        CASE WHEN b.named IS NULL THEN lag(b.message_hashes) OVER w ELSE p.message_hashes END AS prev_messages,
        CASE WHEN b.named IS NULL THEN lag(b.breakpoints) OVER w ELSE p.breakpoints END AS prev_breakpoints,
        CASE WHEN b.named IS NULL THEN lag(b.ttl) OVER w ELSE p.ttl END AS prev_ttl
    FROM base AS b
    LEFT JOIN base AS p ON p.id = b.named
    WINDOW w AS (PARTITION BY b.conversation ORDER BY b.started_at, b.id)
),
missed AS (
    SELECT * FROM seq
    WHERE prev_id IS NOT NULL AND prev_input > 0 AND cache_read < {{miss_share}} * prev_input
      -- without a thread_key, a longer gap starts a new conversation
      AND (threaded OR epoch(started_at) - epoch(prev_end) <= {{run_gap_s}})
      AND ($since IS NULL OR started_at >= $since) AND ($until IS NULL OR started_at < $until)
),
-- The minimum per model that missed (a handful of rows), joined instead of looked up per miss.
model_minimum AS (
    SELECT model, arg_min(tokens, priority) AS minimum
    FROM (SELECT DISTINCT model FROM missed WHERE model IS NOT NULL) AS m
    JOIN minimums ON model ILIKE pattern
    GROUP BY model
),
compared AS (
    SELECT m.*, model_minimum.minimum,
        CASE
            WHEN chained THEN NULL  -- a follow-up sends only what is new
            -- the usual case, told from the JSON text alone: the earlier request's message
            -- list is where this one's starts (the same text up to its closing bracket)
            WHEN starts_with(cm_text, rtrim(pm_text, ']'))
                 AND substr(cm_text, length(rtrim(pm_text, ']')) + 1, 1) IN (',', ']') THEN NULL
            -- else the first message that differs, 0-based, among those both have (NULL
            -- when this request's messages are the start of the earlier one's)
            ELSE list_position(
                list_transform(
                    generate_series(1, least(len(CAST(pm_text AS VARCHAR[])), len(CAST(cm_text AS VARCHAR[])))),
                    i -> coalesce(CAST(pm_text AS VARCHAR[])[i] = CAST(cm_text AS VARCHAR[])[i], false)
                ),
                false
            ) - 1
        END AS first_diff
    FROM (
        SELECT *, coalesce(prev_messages, '[]') AS pm_text, coalesce(message_hashes, '[]') AS cm_text
        FROM missed
    ) AS m
    LEFT JOIN model_minimum USING (model)
)
SELECT
    id AS exchange_id,
    team,
    model,
    started_at,
    CASE
        WHEN prev_input < minimum THEN 'below_minimum'
        WHEN tools_hash IS DISTINCT FROM prev_tools THEN 'tools_changed'
        WHEN system_hash IS DISTINCT FROM prev_system THEN 'system_changed'
        WHEN first_diff >= 0 THEN 'message_edited'
        WHEN epoch(started_at) - epoch(prev_end) >
             {{ttl_seconds_of_prev_ttl}} THEN 'ttl_expired'
        WHEN protocol IN {{breakpoint_protocols}}  -- caching needs explicit breakpoints
             AND (coalesce(breakpoints, 0) = 0 OR coalesce(prev_breakpoints, 0) = 0) THEN 'no_breakpoint'
        ELSE 'unexplained'
    END AS cause,
    CASE WHEN coalesce(prev_input >= minimum, true) AND tools_hash IS NOT DISTINCT FROM prev_tools
              AND system_hash IS NOT DISTINCT FROM prev_system AND first_diff >= 0 THEN first_diff END
        AS message_index,
    CASE WHEN prev_input < minimum THEN 0 ELSE greatest(least(prev_input, input_tokens) - cache_read, 0) END
        AS missed_tokens,
    -- (greatest() skips NULLs in DuckDB, so the unpriced case is spelled out)
    CASE WHEN prev_input < minimum THEN 0 WHEN rate_input_pico IS NOT NULL THEN
        greatest(least(prev_input, input_tokens) - cache_read, 0)
            * greatest(rate_input_pico - coalesce(rate_cache_read_pico, 0), 0)
    END AS extra_cost_usd,
    prev_id AS previous_exchange_id,
    round(epoch(started_at) - epoch(prev_end), 3) AS gap_s
FROM compared
ORDER BY started_at, id
