-- tools.sql over the lake's daily summary (analytics/lake_daily.py: `daily_rows`, the
-- summary's days plus the rows it does not hold, summed alike): the same columns and the
-- same groups. tools.sql's `calls` groups are those with a tool call, its `conversation`
-- ones those with a problem, joined as it joins them: so here too, from the summary rows
-- that have any.
WITH calls AS (
    SELECT
        $dims
        sum(tool_calls) AS tool_calls,
        sum(valid) AS valid,
        sum(invalid_json) AS invalid_json,
        sum(schema_violation) AS schema_violation,
        sum(unknown_tool) AS unknown_tool,
        sum(truncated) AS truncated,
        sum(args_lost) AS args_lost,
        sum(unchecked) AS unchecked
    FROM daily_rows
    WHERE tool_calls > 0
    $group_by
),
conversation AS (
    SELECT
        $dims
        sum(duplicate_id) AS duplicate_id,
        sum(missing_result) AS missing_result,
        sum(orphan_result) AS orphan_result
    FROM daily_rows
    WHERE duplicate_id + missing_result + orphan_result > 0
    $group_by
)
SELECT
    $keys
    CAST(coalesce(calls.tool_calls, 0) AS BIGINT) AS tool_calls,
    CAST(coalesce(calls.valid, 0) AS BIGINT) AS valid,
    CAST(coalesce(calls.invalid_json, 0) AS BIGINT) AS invalid_json,
    CAST(coalesce(calls.schema_violation, 0) AS BIGINT) AS schema_violation,
    CAST(coalesce(calls.unknown_tool, 0) AS BIGINT) AS unknown_tool,
    CAST(coalesce(calls.truncated, 0) AS BIGINT) AS truncated,
    CAST(coalesce(calls.args_lost, 0) AS BIGINT) AS args_lost,
    CAST(coalesce(calls.unchecked, 0) AS BIGINT) AS unchecked,
    CAST(coalesce(conversation.duplicate_id, 0) AS BIGINT) AS duplicate_id,
    CAST(coalesce(conversation.missing_result, 0) AS BIGINT) AS missing_result,
    CAST(coalesce(conversation.orphan_result, 0) AS BIGINT) AS orphan_result
FROM calls FULL JOIN conversation $join
ORDER BY $order_by
