// llmtap dashboard: the fixed vocabularies (tool statuses, conversation problems, cache
// verdicts and causes, finish reasons, price statuses and reasons, report kinds).
// GENERATED from protocols/vocabulary.py, do not edit: run
//   python -m llmtap.protocols.vocabulary_js > dashboards/vocabulary.js
// (tests/protocols/test_vocabulary.py checks this file is what that writes).
// Not responsible for labels, colours or order of display (format.js, dashboard.js).
var LlmtapVocabulary = Object.freeze({
  TOOL_STATUSES: Object.freeze(["valid", "invalid_json", "schema_violation", "unknown_tool", "truncated", "args_lost", "unchecked"]),
  TOOL_PROBLEMS: Object.freeze(["duplicate_id", "missing_result", "orphan_result"]),
  CACHE_VERDICTS: Object.freeze(["first", "hit", "miss", "not_cacheable"]),
  MISS_CAUSES: Object.freeze(["below_minimum", "tools_changed", "system_changed", "message_edited", "ttl_expired", "no_breakpoint", "unexplained"]),
  FINISH_REASONS: Object.freeze(["end_turn", "max_tokens", "tool_use", "stop_sequence", "content_filter", "refusal", "pause_turn", "context_window", "error"]),
  PRICE_STATUSES: Object.freeze(["priced", "unpriced", "usage_missing"]),
  PRICE_REASONS: Object.freeze(["unverified_host", "unknown_model"]),
  REPORT_KINDS: Object.freeze(["usage", "cost", "cache", "finish", "tools", "errors", "latency", "conversations", "budgets", "whatif"]),
  NO_FINISH: "unknown",
});
