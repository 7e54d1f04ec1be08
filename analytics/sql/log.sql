-- The audit log: exchanges newest first (or, by $sort, costliest first — the unpriced
-- last — or with the most input + output tokens first), one row each, with their tool-call problems (the
-- calls whose status is not valid, and the problems across a conversation stored with the
-- exchange) and the cause of a cache miss stored with it (storage/verdicts.py).
-- Every filter is a bound parameter; NULL means "any".
SELECT
    e.id,
    e.started_at,
    e.team,
    e.key_last4,
    e.protocol,
    e.provider,
    coalesce(e.model, e.model_requested) AS model,
    e.status,
    e.finish_reason,
    e.usage_input_tokens AS input_tokens,
    e.usage_cache_read_input_tokens AS cached_tokens,
    e.usage_output_tokens AS output_tokens,
    e.cost_total_pico AS cost_usd,
    e.price_status,
    e.duration_ms,
    e.tool_call_count,
    coalesce(p.problems, 0) AS tool_problems,
    p.statuses AS tool_problem_kinds,
    e.cache_cause AS cache_miss,
    e.request_body_ref IS NOT NULL AS has_bodies,
    e.error_type,
    e.decode_error IS NOT NULL AS decode_error
FROM exchanges AS e
LEFT JOIN (
    SELECT exchange_id, count(*) AS problems, string_agg(DISTINCT status, ',' ORDER BY status) AS statuses
    FROM (
        SELECT exchange_id, status FROM tool_calls WHERE status <> 'valid'
        UNION ALL
        SELECT id, unnest(list_transform(from_json(tool_problems, '[{"status": "VARCHAR"}]'), p -> p.status))
        FROM exchanges WHERE tool_problems IS NOT NULL
    ) AS problems
    GROUP BY exchange_id
) AS p ON p.exchange_id = e.id
WHERE ($since IS NULL OR e.started_at >= $since) AND ($until IS NULL OR e.started_at < $until)
  AND ($team IS NULL OR e.team = $team)
  AND ($model IS NULL OR coalesce(e.model, e.model_requested) = $model OR e.model_requested = $model)
  AND ($provider IS NULL OR e.provider = $provider)
  AND ($status IS NULL OR CAST(e.status AS VARCHAR) = $status
       OR ($status = 'error' AND (coalesce(e.status, 0) >= 400 OR e.error_type IS NOT NULL)))
  AND ($finish IS NULL OR coalesce(e.finish_reason, 'unknown') = $finish)
  AND ($tool_problem IS NULL OR (p.problems > 0 AND ($tool_problem = 'any' OR contains(p.statuses, $tool_problem))))
  AND ($cache_miss IS NULL OR (($cache_miss = 'any' AND e.cache_verdict = 'miss') OR e.cache_cause = $cache_miss))
  AND ($ids IS NULL OR list_contains($ids, e.id))
ORDER BY
    CASE WHEN $sort = 'cost' THEN e.cost_total_pico END DESC NULLS LAST,
    CASE WHEN $sort = 'tokens' THEN coalesce(e.usage_input_tokens, 0) + coalesce(e.usage_output_tokens, 0) END
        DESC NULLS LAST,
    e.started_at DESC, e.id DESC
LIMIT $limit OFFSET $offset
