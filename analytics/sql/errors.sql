-- Errors per group: HTTP status >= 400, error bodies and mid-stream error events, plus
-- exchanges cut short. rate_limited is 429, server_errors 5xx, overloaded 529; an error
-- type or code counts as the status it stands for (protocols/error_kinds.py, spliced in
-- as $rate_limited_types and so on: a mid-stream `overloaded_error` is overloaded and a
-- server error); retry_after is what the provider asked for, in seconds.
SELECT
    $dims
    count(*) AS requests,
    count(*) FILTER (WHERE is_error) AS errors,
    round(count(*) FILTER (WHERE is_error) / count(*), 4) AS error_rate,
    count(*) FILTER (WHERE status = 429 OR etype IN $rate_limited_types OR ecode IN $rate_limited_types)
        AS rate_limited,
    count(*) FILTER (WHERE status >= 500 OR etype IN $server_error_types OR ecode IN $server_error_types)
        AS server_errors,
    count(*) FILTER (WHERE status = 529 OR etype IN $overloaded_types OR ecode IN $overloaded_types) AS overloaded,
    count(*) FILTER (WHERE is_error AND status < 400) AS stream_errors,
    count(*) FILTER (WHERE interrupted IS NOT NULL) AS interrupted,
    count(*) FILTER (WHERE decode_error IS NOT NULL) AS decode_errors,
    max(retry_after_s) AS retry_after_max_s,
    round(avg(retry_after_s), 3) AS retry_after_avg_s
FROM (
    SELECT *, (coalesce(status, 0) >= 400 OR error_type IS NOT NULL OR error_code IS NOT NULL
               OR finish_reason = 'error') AS is_error,
           lower(error_type) AS etype, lower(error_code) AS ecode
    FROM exchanges
    WHERE ($since IS NULL OR started_at >= $since) AND ($until IS NULL OR started_at < $until)
) AS e
$group_by
ORDER BY $order_by
