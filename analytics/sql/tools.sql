-- Tool calls per group by status (SPEC §5), with the problems across a conversation
-- (duplicate_id, missing_result, orphan_result) stored with each exchange when it was
-- written (storage/verdicts.py; listed by tool_problems.sql).
WITH calls AS (
    SELECT
        $dims
        count(*) AS tool_calls,
        count(*) FILTER (WHERE t.status = 'valid') AS valid,
        count(*) FILTER (WHERE t.status = 'invalid_json') AS invalid_json,
        count(*) FILTER (WHERE t.status = 'schema_violation') AS schema_violation,
        count(*) FILTER (WHERE t.status = 'unknown_tool') AS unknown_tool,
        count(*) FILTER (WHERE t.status = 'truncated') AS truncated,
        count(*) FILTER (WHERE t.status = 'args_lost') AS args_lost,
        -- not malformed: the check could not be run within its bound (SPEC §5)
        count(*) FILTER (WHERE t.status = 'unchecked') AS unchecked
    FROM exchanges JOIN tool_calls AS t ON t.exchange_id = exchanges.id
    WHERE ($since IS NULL OR started_at >= $since) AND ($until IS NULL OR started_at < $until)
    $group_by
),
conversation AS (  -- the problems across a conversation, stored with each exchange
    SELECT
        $dims
        count(*) FILTER (WHERE problem = 'duplicate_id') AS duplicate_id,
        count(*) FILTER (WHERE problem = 'missing_result') AS missing_result,
        count(*) FILTER (WHERE problem = 'orphan_result') AS orphan_result
    FROM (
        SELECT exchanges.*,
            unnest(list_transform(from_json(tool_problems, '[{"status": "VARCHAR"}]'), p -> p.status)) AS problem
        FROM exchanges
        WHERE tool_problems IS NOT NULL
          AND ($since IS NULL OR started_at >= $since) AND ($until IS NULL OR started_at < $until)
    ) AS p
    $group_by
)
SELECT
    $keys
    coalesce(calls.tool_calls, 0) AS tool_calls,
    coalesce(calls.valid, 0) AS valid,
    coalesce(calls.invalid_json, 0) AS invalid_json,
    coalesce(calls.schema_violation, 0) AS schema_violation,
    coalesce(calls.unknown_tool, 0) AS unknown_tool,
    coalesce(calls.truncated, 0) AS truncated,
    coalesce(calls.args_lost, 0) AS args_lost,
    coalesce(calls.unchecked, 0) AS unchecked,
    coalesce(conversation.duplicate_id, 0) AS duplicate_id,
    coalesce(conversation.missing_result, 0) AS missing_result,
    coalesce(conversation.orphan_result, 0) AS orphan_result
FROM calls FULL JOIN conversation $join
ORDER BY $order_by
