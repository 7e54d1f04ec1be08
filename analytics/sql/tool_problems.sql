-- Tool-call problems (SPEC §5): every call whose status is not `valid` (set at record time
-- against the JSON Schema the same request declared), and the problems across a
-- conversation, stored with each exchange when it was written (exchanges.tool_problems,
-- storage/verdicts.py by protocols/rules.py): duplicate_id (an id a call already used in
-- the conversation), missing_result (the next request of the line continues this one yet
-- carries no result for a call; next_id names it), orphan_result (a request carries a
-- result for an id no earlier call of the conversation made, reported where it first
-- appears). The stored lists are parsed only on the exchanges that have some.
WITH stored AS (
    SELECT id AS exchange_id, team, started_at,
        unnest(from_json(tool_problems, '[{"status": "VARCHAR", "call_id": "VARCHAR", "tool": "VARCHAR", "next_id": "VARCHAR"}]'))
            AS problem
    FROM exchanges
    WHERE tool_problems IS NOT NULL
      AND ($since IS NULL OR started_at >= $since) AND ($until IS NULL OR started_at < $until)
)
SELECT exchange_id, team, tool, call_id, status, detail, started_at
FROM (
    SELECT t.exchange_id, e.team, t.name AS tool, t.call_id, t.status, t.status_detail AS detail, e.started_at
    FROM tool_calls AS t JOIN exchanges AS e ON e.id = t.exchange_id
    WHERE t.status <> 'valid'
      AND ($since IS NULL OR e.started_at >= $since) AND ($until IS NULL OR e.started_at < $until)
    UNION ALL
    SELECT exchange_id, team, problem.tool, problem.call_id, problem.status,
        CASE problem.status
            WHEN 'duplicate_id' THEN 'the id was already used by an earlier call of this conversation'
            WHEN 'missing_result' THEN 'the next request (' || problem.next_id || ') carries no result for this call'
            WHEN 'orphan_result' THEN 'a tool result for an id no earlier call of this conversation made'
        END AS detail,
        started_at
    FROM stored
) AS problems
ORDER BY started_at, exchange_id, status, call_id, tool  -- ties in a stable order
