-- Tool-call problems (SPEC §5): every call whose status is not `valid` (the status was
-- set at record time against the JSON Schema the same request declared; listed whether or
-- not the exchange belongs to a conversation), and the checks across a conversation (one
-- key, else team, and model, sharing the first message): duplicate_id (an id a call
-- already used), missing_result (the next request continues the conversation — it
-- carries more messages — yet lacks the result of a call; a restart of the same task is
-- not a continuation),
-- orphan_result (a request carries a result for an id that neither an earlier response
-- nor the request's own history holds; reported at the first request that carries it,
-- not again at every later one that repeats the history).
-- One pass over the store; the JSON lists of ids are parsed only where there are calls
-- or results.
WITH turns AS (
    SELECT id, team, started_at, request_tool_result_ids, request_tool_call_ids,
           coalesce(request_message_count, 0) AS messages,
           -- one 64-bit key per conversation, NULL without a first message (no request
           -- body): such an exchange is in no conversation (see cache_misses.sql)
           CASE WHEN first_message_hash IS NOT NULL THEN
               hash(coalesce(key_fingerprint, 'team:' || team), model, first_message_hash) END AS conversation
    FROM exchanges
),
conv AS (
    SELECT id, team, started_at, conversation, request_tool_result_ids, request_tool_call_ids, messages,
           CASE WHEN conversation IS NOT NULL THEN lead(id) OVER w END AS next_id,
           CASE WHEN conversation IS NOT NULL THEN lead(messages) OVER w END AS next_messages,
           CASE WHEN conversation IS NOT NULL THEN lead(request_tool_result_ids) OVER w END AS next_results,
           CASE WHEN conversation IS NOT NULL THEN lag(request_tool_result_ids) OVER w END AS earlier_results,
           row_number() OVER w AS turn
    FROM turns
    WINDOW w AS (PARTITION BY conversation ORDER BY started_at, id)
),
calls AS (
    SELECT t.exchange_id, t.position, t.call_id, t.name, t.status, t.status_detail,
           c.team, c.started_at, c.conversation, c.next_id, c.next_results, c.turn, c.messages, c.next_messages
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
        SELECT *, row_number() OVER (PARTITION BY conversation, call_id ORDER BY turn, position) AS seen
        FROM calls WHERE call_id IS NOT NULL AND conversation IS NOT NULL
    ) AS numbered
    WHERE seen > 1
),
missing AS (
    SELECT exchange_id, team, name AS tool, call_id, 'missing_result' AS status,
           'the next request (' || next_id || ') carries no result for this call' AS detail, started_at
    FROM calls
    WHERE call_id IS NOT NULL AND next_id IS NOT NULL AND next_messages > messages
      AND NOT list_contains(CAST(coalesce(next_results, '[]') AS VARCHAR[]), call_id)
),
carried AS (  -- the requests that carry tool results, with their lists parsed
    SELECT id, team, started_at, conversation, turn,
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
          WHERE k.conversation = c.conversation AND k.call_id = r.result_id AND k.turn < c.turn)
)
SELECT exchange_id, team, tool, call_id, status, detail, started_at
FROM (
    SELECT * FROM invalid UNION ALL SELECT * FROM duplicate
    UNION ALL SELECT * FROM missing UNION ALL SELECT * FROM orphan
) AS problems
WHERE ($since IS NULL OR started_at >= $since) AND ($until IS NULL OR started_at < $until)
ORDER BY started_at, exchange_id, status, call_id, tool  -- ties in a stable order
