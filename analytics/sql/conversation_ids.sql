-- The conversation each exchange belongs to (SPEC §5), as the id of the conversation's
-- first exchange: the run of requests of one key (else team) and model that share their
-- first message, where each request starts at most one hour after the one before it
-- ended; a longer gap starts a new conversation, so two separate runs never merge because
-- they start with the same prompt. An exchange without a first message (no request
-- decoded) is a conversation of its own. Columns: id, conversation_id.
-- Used as a CTE by the reports that need it and by `export`; the exchanges it reads are
-- all of them, whatever period a report shows (a conversation may start before it).
WITH keyed AS (
    SELECT id, started_at, coalesce(ended_at, started_at) AS ended,
        -- one 64-bit key per thread, as in cache_misses.sql
        CASE WHEN first_message_hash IS NOT NULL THEN
            hash(coalesce(key_fingerprint, 'team:' || team), model, first_message_hash) END AS thread
    FROM exchanges
),
starts AS (
    SELECT id, started_at, thread,
        thread IS NULL
            OR lag(ended) OVER w IS NULL
            OR epoch(started_at) - epoch(lag(ended) OVER w) > 3600 AS starts
    FROM keyed
    WINDOW w AS (PARTITION BY thread ORDER BY started_at, id)
)
SELECT
    id,
    CASE WHEN thread IS NULL THEN id ELSE
        last_value(CASE WHEN starts THEN id END IGNORE NULLS) OVER (
            PARTITION BY thread ORDER BY started_at, id ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
        )
    END AS conversation_id
FROM starts
