-- The minimum cacheable prompt length per model, in tokens (Anthropic's prompt-caching
-- page, https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching, and Gemini's
-- context caching: 1,024 for Flash, 4,096 for Pro); a model matches the pattern of the
-- lowest priority that fits. Spliced as a CTE into cache.sql and cache_misses.sql, so the
-- report and --list agree on what is not cacheable.
minimums(pattern, tokens, priority) AS (
    VALUES ('%opus-4-5%', 4096, 1), ('%opus-4-6%', 4096, 1), ('%haiku-4-5%', 4096, 1),
           ('%sonnet-4-6%', 2048, 1), ('%opus-4-7%', 2048, 1), ('claude-3-haiku%', 2048, 2),
           ('claude-3-5-haiku%', 2048, 2), ('claude%', 1024, 3),
           ('gemini%pro%', 4096, 4), ('gemini%', 1024, 5),
           ('%', 1024, 9)
)
