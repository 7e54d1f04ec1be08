-- What stands under `report cost`'s table (SPEC §3): per price status, reason, model and
-- price version in the since/until window, the requests and tokens. The caller names the
-- versions of the priced rows and lists the unpriced models with their requests and
-- tokens, and the counts of usage-missing and unverified-host exchanges. A few rows: one
-- per model and version.
SELECT
    coalesce(price_status, 'unpriced') AS price_status,
    price_reason,
    coalesce(model, model_requested, '(unknown)') AS model,
    price_version,
    count(*) AS requests,
    coalesce(sum(usage_input_tokens), 0) AS input_tokens,
    coalesce(sum(usage_output_tokens), 0) AS output_tokens
FROM exchanges
WHERE ($since IS NULL OR started_at >= $since) AND ($until IS NULL OR started_at < $until)
GROUP BY ALL
ORDER BY requests DESC, model, price_version
