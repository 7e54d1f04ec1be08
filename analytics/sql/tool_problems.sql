-- Tool-call problems (SPEC §5): every call whose status is not `valid` (the status was
-- set at record time against the JSON Schema the same request declared), and the checks
-- across a conversation (one key, else team, and model, sharing the first message):
-- duplicate_id (an id a call already used), missing_result (the next request lacks the
-- result of a call), orphan_result (a request carries a result for an id that neither an
-- earlier response nor the request's own history holds).
WITH conv AS (
    SELECT id, team, started_at, finish_reason,
           coalesce(key_fingerprint, 'team:' || team) || '|' || coalesce(model, '') || '|' || first_message_hash
               AS conversation,
           CAST(coalesce(request_tool_result_ids, '[]') AS VARCHAR[]) AS results,
           CAST(coalesce(request_tool_call_ids, '[]') AS VARCHAR[]) AS history,
           lead(id) OVER w AS next_id,
           row_number() OVER w AS turn
    FROM exchanges
    WHERE first_message_hash IS NOT NULL
    WINDOW w AS (PARTITION BY coalesce(key_fingerprint, 'team:' || team), model, first_message_hash
                 ORDER BY started_at, id)
),
calls AS (
    SELECT t.exchange_id, t.position, t.call_id, t.name, t.status, t.status_detail,
           c.team, c.started_at, c.conversation, c.next_id, c.turn
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
        FROM calls WHERE call_id IS NOT NULL
    ) AS numbered
    WHERE seen > 1
),
missing AS (
    SELECT k.exchange_id, k.team, k.name AS tool, k.call_id, 'missing_result' AS status,
           'the next request (' || n.id || ') carries no result for this call' AS detail, k.started_at
    FROM calls AS k JOIN conv AS n ON n.id = k.next_id
    WHERE k.call_id IS NOT NULL AND NOT list_contains(n.results, k.call_id)
),
orphan AS (
    SELECT c.id AS exchange_id, c.team, NULL AS tool, r.result_id AS call_id, 'orphan_result' AS status,
           'a tool result for an id no earlier call of this conversation made' AS detail, c.started_at
    FROM conv AS c, unnest(c.results) AS r(result_id)
    WHERE NOT list_contains(c.history, r.result_id)
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
ORDER BY started_at, exchange_id, status
