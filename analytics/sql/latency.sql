-- Latency per group in milliseconds: time to first byte (response headers), time to first
-- token (first text or tool-call delta), and total; p50 and p95 (interpolated). Error
-- responses are left out, and so are warmups (no generation: their timings are not a
-- model's) and background work (`background: true`: its total runs to the poll that found
-- it done, so it measures the client's polling as much as the model). Each column's two
-- quantiles come from one pass over its values.
SELECT
    $names
    requests,
    round(ttfb[1], 1) AS ttfb_p50_ms,
    round(ttfb[2], 1) AS ttfb_p95_ms,
    round(ttft[1], 1) AS ttft_p50_ms,
    round(ttft[2], 1) AS ttft_p95_ms,
    round(total[1], 1) AS total_p50_ms,
    round(total[2], 1) AS total_p95_ms
FROM (
    SELECT
        $dims
        count(*) AS requests,
        quantile_cont(ttfb_ms, [0.5, 0.95]) AS ttfb,
        quantile_cont(ttft_ms, [0.5, 0.95]) AS ttft,
        quantile_cont(duration_ms, [0.5, 0.95]) AS total
    FROM exchanges
    WHERE ($since IS NULL OR started_at >= $since) AND ($until IS NULL OR started_at < $until)
      AND coalesce(status, 0) < 400
      AND NOT coalesce(warmup, false)
      AND background_state IS NULL
    $group_by
) AS quantiles
ORDER BY $order_by
