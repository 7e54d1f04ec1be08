-- finish.sql over the lake's daily summary (analytics/lake_daily.py): the same columns;
-- `generations` are the requests that were not warmups.
SELECT
    $dims
    coalesce(finish_reason, 'unknown') AS finish_reason,
    sum(generations) AS requests,
    round(sum(generations) / sum(sum(generations)) OVER (PARTITION BY $partition), 4) AS share,
    sum(incomplete) AS incomplete
FROM daily_rows
WHERE generations > 0
$group_finish
ORDER BY $order_by, requests DESC, finish_reason  -- ties in a stable order
