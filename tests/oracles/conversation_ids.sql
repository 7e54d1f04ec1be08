-- TEST ORACLE (tests/oracles/__init__.py): the window query the reports ran before the
-- verdicts were stored; the stored verdicts must equal what it decides. The rules
-- constants come from protocols/rules.py (placeholders in double braces).
-- The conversation each exchange belongs to (SPEC §5), as the id of the conversation's
-- first exchange. Identity, first match wins:
-- 1. thread_key (storage/threads.py, set when the exchange was written): the session a
--    client named in a header (`s…`, and `c…` for a response chain inside it), or the
--    Responses previous_response_id chain it continues (`r…`). Every exchange whose
--    thread_key has the same digits after its first letter is one conversation, whatever
--    its model, first message or gaps: a session or a chain says itself where it goes on.
-- 2. else the prefix rule: the run of requests of one key (else team) and model that share
--    their first message, where each request starts at most one hour after the one before
--    it ended; a longer gap starts a new conversation.
-- So two separate runs never merge because they start with the same prompt: their
-- session ids differ, or (without one) an hour passed between them. An exchange with
-- neither a thread_key nor a first message (no request decoded) is a conversation of its
-- own. Columns: every column of `exchanges` and conversation_id (a consumer names the
-- ones it reads; DuckDB reads only those). Used as a CTE by the reports that need it and
-- by `export`; the exchanges it reads are all of them, whatever period a report shows (a
-- conversation may start before it).
WITH keyed AS (
    SELECT *, coalesce(ended_at, started_at) AS conversation_end_,
        -- one 64-bit key per thread, as in cache_misses.sql
        CASE WHEN thread_key IS NOT NULL THEN hash(substr(thread_key, 2))
             WHEN first_message_hash IS NOT NULL THEN
                 hash(coalesce(key_fingerprint, 'team:' || team), model, first_message_hash) END AS conversation_thread_
    FROM exchanges
),
starts AS (
    SELECT *,
        conversation_thread_ IS NULL
            OR lag(conversation_end_) OVER w IS NULL
            OR (thread_key IS NULL AND epoch(started_at) - epoch(lag(conversation_end_) OVER w) > {{run_gap_s}})
            AS conversation_starts_
    FROM keyed
    WINDOW w AS (PARTITION BY conversation_thread_ ORDER BY started_at, id)
)
SELECT * EXCLUDE (conversation_end_, conversation_thread_, conversation_starts_),
    CASE WHEN conversation_thread_ IS NULL THEN id ELSE
        last_value(CASE WHEN conversation_starts_ THEN id END IGNORE NULLS) OVER (
            PARTITION BY conversation_thread_ ORDER BY started_at, id ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
        )
    END AS conversation_id
FROM starts
