-- How generations ended, per group, in the canonical finish reasons (SPEC §2); a cut
-- stream has none and shows as `unknown`. Warmups (a request that asked for no
-- generation, SPEC §2 `warmup`) generated nothing to end, so they are left out.
SELECT
    $dims
    coalesce(finish_reason, 'unknown') AS finish_reason,
    count(*) AS requests,
    round(count(*) / sum(count(*)) OVER (PARTITION BY $partition), 4) AS share,
    count(*) FILTER (WHERE NOT complete) AS incomplete
FROM exchanges
WHERE ($since IS NULL OR started_at >= $since) AND ($until IS NULL OR started_at < $until)
  AND NOT coalesce(warmup, false)
$group_finish
ORDER BY $order_by, requests DESC, finish_reason  -- ties in a stable order
