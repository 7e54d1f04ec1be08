-- Prompt-cache misses (SPEC §5), one row each, as stored with the exchange when it was
-- written (storage/verdicts.py decides them by protocols/rules.py, and again for the
-- neighbours of an exchange that arrives out of order, and at `reprocess`). A request is
-- compared with the turn before it (previous_exchange_id here: the exchange it names, else
-- the previous request of its line); one that continues it yet reads under the rule's
-- share of its input from cache is a miss, with its cause: tools_changed, system_changed,
-- message_edited (message_index: the first message that differs, 0-based), ttl_expired,
-- no_breakpoint, else unexplained. `below_minimum` rows are the `not_cacheable` ones: the
-- previous request was under the model's minimum cacheable length; missed_tokens and
-- extra_cost_usd 0. missed_tokens is what a hit would have read; extra_cost_usd
-- (pico-dollars here) is what those tokens cost at the input rate instead of the
-- cache-read rate, NULL (unknown, not $0) when the model has no price.
SELECT
    id AS exchange_id,
    team,
    model,
    started_at,
    cache_cause AS cause,
    cache_message_index AS message_index,
    cache_missed_tokens AS missed_tokens,
    CASE WHEN cache_verdict = 'not_cacheable' THEN 0 WHEN rate_input_pico IS NOT NULL THEN
        cache_missed_tokens * greatest(rate_input_pico - coalesce(rate_cache_read_pico, 0), 0)
    END AS extra_cost_usd,
    cache_previous_id AS previous_exchange_id,
    round(cache_gap_ms / 1000, 3) AS gap_s
FROM exchanges
WHERE cache_verdict IN ('miss', 'not_cacheable')
  AND ($since IS NULL OR started_at >= $since) AND ($until IS NULL OR started_at < $until)
ORDER BY started_at, id
