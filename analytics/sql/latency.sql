-- Latency per group in milliseconds: time to first byte (response headers), time to first
-- token (first text or tool-call delta), and total; p50 and p95.
SELECT
    $dims
    count(*) AS requests,
    round(quantile_cont(ttfb_ms, 0.5), 1) AS ttfb_p50_ms,
    round(quantile_cont(ttfb_ms, 0.95), 1) AS ttfb_p95_ms,
    round(quantile_cont(ttft_ms, 0.5), 1) AS ttft_p50_ms,
    round(quantile_cont(ttft_ms, 0.95), 1) AS ttft_p95_ms,
    round(quantile_cont(duration_ms, 0.5), 1) AS total_p50_ms,
    round(quantile_cont(duration_ms, 0.95), 1) AS total_p95_ms
FROM exchanges
WHERE ($since IS NULL OR started_at >= $since) AND ($until IS NULL OR started_at < $until)
  AND coalesce(status, 0) < 400
$group_by
ORDER BY $order_by
