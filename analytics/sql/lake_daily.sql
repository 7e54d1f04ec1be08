-- The lake's daily summary (llmtap.daily, SPEC §5 "Summaries are data"): one row per UTC
-- day and group, with the measures the usage, cost, finish, errors and latency reports
-- and cost's footer sum (analytics/lake_daily.py). `lake sync` keeps it from the lake's
-- rows; a report over the lake also runs it over the rows the summary does not hold
-- (days the store's tail touches, the window's partial days) and sums both alike. Each
-- grouping column is what a report's --by reads (model: as coalesce(model,
-- model_requested)); each measure is the per-row expression of the report's own .sql.
-- The tool calls (tools.sql) are counted per exchange and joined onto its row (the calls'
-- view has their exchange_id and status, of the same days or more: only the calls of the
-- rows summed count, as tools.sql's join counts them); the conversation problems are
-- counted in each row's stored tool_problems. The statuses and problems spliced in are
-- protocols/vocabulary.py's (lake_daily.summary_sql).
-- $source is the rows (a view in the exchanges' columns), $where a filter of them.
SELECT
    CAST(started_at AS DATE) AS day,
    CAST(team AS VARCHAR) AS team,
    CAST(provider AS VARCHAR) AS provider,
    CAST(coalesce(model, model_requested) AS VARCHAR) AS model,
    CAST(protocol AS VARCHAR) AS protocol,
    CAST(service_tier AS VARCHAR) AS service_tier,
    CAST(key_last4 AS VARCHAR) AS key_last4,
    CAST(key_fingerprint AS VARCHAR) AS key_fingerprint,
    CAST(price_version AS VARCHAR) AS price_version,
    CAST(price_status AS VARCHAR) AS price_status,
    CAST(price_reason AS VARCHAR) AS price_reason,
    CAST(status AS BIGINT) AS status,
    CAST(finish_reason AS VARCHAR) AS finish_reason,
    count(*) AS requests,
    count(*) FILTER (WHERE usage_input_tokens IS NULL) AS usage_missing,
    CAST(sum(usage_input_tokens) AS BIGINT) AS input_tokens,
    CAST(sum(usage_cache_read_input_tokens) AS BIGINT) AS cache_read_tokens,
    CAST(sum(usage_cache_creation_input_tokens) AS BIGINT) AS cache_write_tokens,
    CAST(sum(usage_input_tokens - usage_cache_read_input_tokens - usage_cache_creation_input_tokens) AS BIGINT)
        AS uncached_input_tokens,
    CAST(sum(usage_output_tokens) AS BIGINT) AS output_tokens,
    CAST(sum(usage_reasoning_output_tokens) AS BIGINT) AS reasoning_tokens,
    CAST(sum(cost_input_pico) AS DECIMAL(38, 0)) AS cost_input_pico,
    CAST(sum(cost_cache_read_pico) AS DECIMAL(38, 0)) AS cost_cache_read_pico,
    CAST(sum(cost_cache_write_pico) AS DECIMAL(38, 0)) AS cost_cache_write_pico,
    CAST(sum(cost_output_pico) AS DECIMAL(38, 0)) AS cost_output_pico,
    -- the fees of the priced rows (cost.sql: rows priced before fees were kept add 0)
    CAST(sum(CASE WHEN cost_total_pico IS NOT NULL THEN coalesce(cost_fee_pico, 0) END) AS DECIMAL(38, 0))
        AS cost_fee_pico,
    CAST(sum(cost_total_pico) AS DECIMAL(38, 0)) AS cost_total_pico,
    -- finish.sql: warmups generated nothing to end
    count(*) FILTER (WHERE NOT coalesce(warmup, false)) AS generations,
    count(*) FILTER (WHERE NOT coalesce(warmup, false) AND NOT complete) AS incomplete,
    -- errors.sql
    count(*) FILTER (WHERE is_error) AS errors,
    count(*) FILTER (WHERE status = 429 OR etype IN $rate_limited_types OR ecode IN $rate_limited_types)
        AS rate_limited,
    count(*) FILTER (WHERE status >= 500 OR etype IN $server_error_types OR ecode IN $server_error_types)
        AS server_errors,
    count(*) FILTER (WHERE status = 529 OR etype IN $overloaded_types OR ecode IN $overloaded_types) AS overloaded,
    count(*) FILTER (WHERE is_error AND status < 400) AS stream_errors,
    count(*) FILTER (WHERE interrupted IS NOT NULL) AS interrupted,
    count(*) FILTER (WHERE decode_error IS NOT NULL) AS decode_errors,
    CAST(max(retry_after_s) AS DOUBLE) AS retry_after_max_s,
    CAST(sum(retry_after_s) AS DOUBLE) AS retry_after_sum_s,
    count(retry_after_s) AS retry_after_count,
    -- the stored cache verdicts (storage/verdicts.py); extra cost as the brief's rule
    count(*) FILTER (WHERE cache_verdict = 'first') AS cache_first,
    count(*) FILTER (WHERE cache_verdict = 'hit') AS cache_hits,
    count(*) FILTER (WHERE cache_verdict = 'miss') AS cache_misses,
    count(*) FILTER (WHERE cache_verdict = 'not_cacheable') AS cache_not_cacheable,
    CAST(sum(cache_missed_tokens) FILTER (WHERE cache_verdict = 'miss') AS BIGINT) AS cache_missed_tokens,
    -- (greatest() skips NULLs in DuckDB, so the unpriced case is spelled out: NULL, not 0)
    CAST(sum(CASE WHEN rate_input_pico IS NOT NULL THEN
                 cache_missed_tokens * greatest(rate_input_pico - coalesce(rate_cache_read_pico, 0), 0) END)
        FILTER (WHERE cache_verdict = 'miss') AS DECIMAL(38, 0)) AS cache_extra_cost_pico,
    -- latency.sql: no errors, warmups or background work; log-spaced histograms
    count(*) FILTER (WHERE timed) AS latency_requests,
    $ttfb_hist AS ttfb_hist,
    $ttft_hist AS ttft_hist,
    $total_hist AS total_hist,
    $tool_sums
FROM (
    SELECT *, (coalesce(status, 0) >= 400 OR error_type IS NOT NULL OR error_code IS NOT NULL
               OR finish_reason = 'error') AS is_error,
           lower(error_type) AS etype, lower(error_code) AS ecode,
           (coalesce(status, 0) < 400 AND NOT coalesce(warmup, false) AND background_state IS NULL) AS timed,
           CASE WHEN tool_problems IS NOT NULL
                THEN list_transform(from_json(tool_problems, '[{"status": "VARCHAR"}]'), p -> p.status) END
               AS llmtap_problems
    FROM $source
    WHERE $where
) AS e
LEFT JOIN (
    SELECT exchange_id, $tool_call_counts
    FROM $tool_calls
    GROUP BY exchange_id
) AS llmtap_calls ON llmtap_calls.exchange_id = e.id
GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13
