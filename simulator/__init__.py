"""A simulated LLM provider on 127.0.0.1: a local HTTP upstream and, behind it, answers in
the real wire formats of Anthropic Messages, OpenAI Chat Completions and Responses, and
Gemini generateContent and Interactions, with a prompt cache that hits and misses for the
real providers' reasons. Used by the demo, the end-to-end tests and the benchmarks.

- `upstream`: the HTTP/1.1 server (`Upstream`, `Reply`, `Seen`, `sse_chunks`).
- `provider`: `SimulatedProvider`, the router that sends a request to its protocol.
- `plan`: what to answer, from markers in the last user message (`Plan`, `plan_for`).
- `prompt_cache`: the simulated prompt cache (`PromptCache`).
- `wire_common`: token counts, digests and `Reply` framing the protocols share.
- `wire_anthropic`, `wire_openai`, `wire_gemini`: one protocol family each.
- `admin_anthropic`, `admin_openai`: the providers' admin usage and cost reports and key
  listings, from planted usage (`AnthropicAdmin`, `OpenAIAdmin`; what they share in
  `admin_common`), for `llmtap reconcile`'s tests.

Imports go one way: `upstream` <- `wire_common` <- `plan`, `prompt_cache` <- `wire_*` <-
`provider`. Not responsible for proxying, recording or driving traffic (that is the proxy,
the addon and `llmtap.cli.demo`); it imports nothing from `llmtap.cli`, `llmtap.addon`,
`llmtap.bench` or `llmtap.workloads`, so a wheel without them still carries it.
"""
