-- TEST ORACLE (tests/oracles/__init__.py): the window query the reports ran before the
-- verdicts were stored; the stored verdicts must equal what it decides. The rules
-- constants come from protocols/rules.py (placeholders in double braces).
-- Tool-call problems (SPEC §5): every call whose status is not `valid` (the status was
-- set at record time against the JSON Schema the same request declared; listed whether or
-- not the exchange belongs to a conversation), and the checks across a conversation (the
-- identity of conversation_ids.sql: one thread_key — a client's session or a Responses
-- previous_response_id chain — else one key, else team, and model, sharing the first
-- message): duplicate_id (an id a call already used in the conversation), missing_result
-- (the next request of the same line — the same conversation, model and first message;
-- a response chain's next request of the model — continues it — it carries more
-- messages, or names the response before it — yet lacks the result of a call; a restart
-- of the same task is not a continuation), orphan_result (a request carries a result for an
-- id that neither an earlier response of the conversation nor the request's own history
-- holds; reported at the first request that carries it, not again at every later one
-- that repeats the history). A follow-up that names a previous response carries only the
-- new tool output: the referenced response is earlier in its conversation, so its calls
-- are the ones the output answers. A session or chain whose first exchange the store
-- never saw (the proxy started mid-way) reports no orphan at its first exchange.
-- One pass over the store; the JSON lists of ids are parsed only where there are calls
-- or results.
WITH turns AS (
    SELECT id, team, started_at, request_tool_result_ids, request_tool_call_ids,
           coalesce(request_message_count, 0) AS messages, thread_key IS NOT NULL AS threaded,
           coalesce(left(thread_key, 1) IN {{chained}}, false) AS chained,
           -- one 64-bit key per line (see cache_misses.sql), NULL without a first message
           -- (no request body): such an exchange is in no line
           CASE WHEN first_message_hash IS NOT NULL THEN
               hash(coalesce(thread_key, key_fingerprint, 'team:' || team), model,
                    CASE WHEN left(thread_key, 1) IN {{chained}} THEN '' ELSE first_message_hash END) END AS line,
           -- and per conversation: the thread, else the line
           CASE WHEN thread_key IS NOT NULL THEN hash(substr(thread_key, 2))
                WHEN first_message_hash IS NOT NULL THEN
                    hash(coalesce(key_fingerprint, 'team:' || team), model, first_message_hash) END AS conversation
    FROM exchanges
),
conv AS (
    SELECT id, team, started_at, conversation, threaded, chained, request_tool_result_ids, request_tool_call_ids,
           messages,
           CASE WHEN line IS NOT NULL THEN lead(id) OVER w END AS next_id,
           CASE WHEN line IS NOT NULL THEN lead(messages) OVER w END AS next_messages,
           CASE WHEN line IS NOT NULL THEN lead(request_tool_result_ids) OVER w END AS next_results,
           CASE WHEN line IS NOT NULL THEN lag(request_tool_result_ids) OVER w END AS earlier_results
    FROM turns
    WINDOW w AS (PARTITION BY line ORDER BY started_at, id)
),
calls AS (
    SELECT t.exchange_id, t.position, t.call_id, t.name, t.status, t.status_detail,
           c.team, c.started_at, c.conversation, c.chained, c.next_id, c.next_results, c.messages, c.next_messages
    FROM tool_calls AS t JOIN conv AS c ON c.id = t.exchange_id
),
invalid AS (
    SELECT exchange_id, team, name AS tool, call_id, status, status_detail AS detail, started_at
    FROM calls WHERE status <> 'valid'
),
duplicate AS (
    SELECT exchange_id, team, name AS tool, call_id, 'duplicate_id' AS status,
           'the id was already used by an earlier call of this conversation' AS detail, started_at
    FROM (
        SELECT *,
            row_number() OVER (PARTITION BY conversation, call_id ORDER BY started_at, exchange_id, position) AS seen
        FROM calls WHERE call_id IS NOT NULL AND conversation IS NOT NULL
    ) AS numbered
    WHERE seen > 1
),
missing AS (
    SELECT exchange_id, team, name AS tool, call_id, 'missing_result' AS status,
           'the next request (' || next_id || ') carries no result for this call' AS detail, started_at
    FROM calls
    WHERE call_id IS NOT NULL AND next_id IS NOT NULL AND (next_messages > messages OR chained)
      AND NOT list_contains(CAST(coalesce(next_results, '[]') AS VARCHAR[]), call_id)
),
carried AS (  -- the requests that carry tool results, with their lists parsed
    SELECT id, team, started_at, conversation, threaded,
           CAST(request_tool_result_ids AS VARCHAR[]) AS results,
           CAST(coalesce(request_tool_call_ids, '[]') AS VARCHAR[]) AS history,
           CAST(coalesce(earlier_results, '[]') AS VARCHAR[]) AS earlier
    FROM conv
    WHERE request_tool_result_ids IS NOT NULL AND conversation IS NOT NULL
      -- a request that repeats the previous one's results exactly brings no new result
      AND request_tool_result_ids IS DISTINCT FROM earlier_results
),
orphan AS (
    SELECT c.id AS exchange_id, c.team, NULL AS tool, r.result_id AS call_id, 'orphan_result' AS status,
           'a tool result for an id no earlier call of this conversation made' AS detail, c.started_at
    FROM carried AS c, unnest(c.results) AS r(result_id)
    WHERE NOT list_contains(c.history, r.result_id)
      AND NOT list_contains(c.earlier, r.result_id)
      AND NOT EXISTS (
          SELECT 1 FROM calls AS k
          WHERE k.conversation = c.conversation AND k.call_id = r.result_id
            AND (k.started_at < c.started_at OR (k.started_at = c.started_at AND k.exchange_id < c.id)))
      -- a session or chain seen from its first exchange on (see above)
      AND (NOT c.threaded OR EXISTS (
          SELECT 1 FROM conv AS e
          WHERE e.conversation = c.conversation
            AND (e.started_at < c.started_at OR (e.started_at = c.started_at AND e.id < c.id))))
)
SELECT exchange_id, team, tool, call_id, status, detail, started_at
FROM (
    SELECT * FROM invalid UNION ALL SELECT * FROM duplicate
    UNION ALL SELECT * FROM missing UNION ALL SELECT * FROM orphan
) AS problems
WHERE ($since IS NULL OR started_at >= $since) AND ($until IS NULL OR started_at < $until)
ORDER BY started_at, exchange_id, status, call_id, tool  -- ties in a stable order
