"""The OpenTelemetry GenAI semantic conventions as of their current publication, written
down by hand so that a rename on either side fails a test: the attribute keys of the
registry, the well-known values of the enums a span of ours carries, and the names the
conventions retired.

Source: https://github.com/open-telemetry/semantic-conventions-genai, `model/gen-ai/registry.yaml`
and `model/gen-ai/spans.yaml` (span `gen_ai.inference.client`) at commit
a597cdd7f9e21a969e13668ba53d9298b8a4f1ca; its manifest's schema is
https://opentelemetry.io/schemas/gen-ai-dev/1.42.0-dev (stability: development; the
repository has no tagged release yet). The OpenAI refinement's keys and values are
`docs/gen-ai/openai.md` there. Core attributes (server, error, http) are stable and
current in the installed `opentelemetry-semantic-conventions`, so they come from it.

The installed package (0.66b2) lags the GenAI repository: it marks every gen_ai.* key
"moved", still has `gen_ai.usage.cache_creation.input_tokens` (renamed to
`cache_write`, semantic-conventions-genai#440) and lacks the newer keys in LAGGING.

Not responsible for what llmtap emits (telemetry/otlp_spans.py, otlp_request.py).
"""

from __future__ import annotations

from opentelemetry.semconv.attributes import error_attributes, http_attributes, server_attributes

SOURCE = "https://github.com/open-telemetry/semantic-conventions-genai/blob/a597cdd7f9e21a969e13668ba53d9298b8a4f1ca/model/gen-ai/registry.yaml"
SCHEMA_URL = "https://opentelemetry.io/schemas/gen-ai-dev/1.42.0-dev"

# every key of the gen_ai registry, with its type (template keys as their prefix)
GEN_AI: dict[str, str] = {
    "gen_ai.provider.name": "string",
    "gen_ai.request.model": "string",
    "gen_ai.request.max_tokens": "int",
    "gen_ai.request.choice.count": "int",
    "gen_ai.request.temperature": "double",
    "gen_ai.request.top_p": "double",
    "gen_ai.request.top_k": "int",
    "gen_ai.request.stop_sequences": "string[]",
    "gen_ai.request.frequency_penalty": "double",
    "gen_ai.request.presence_penalty": "double",
    "gen_ai.request.encoding_formats": "string[]",
    "gen_ai.request.seed": "int",
    "gen_ai.request.stream": "boolean",
    "gen_ai.request.reasoning.level": "string",
    "gen_ai.request.previous_response.id": "string",
    "gen_ai.request.stream_cursor": "string",
    "gen_ai.response.id": "string",
    "gen_ai.response.model": "string",
    "gen_ai.response.finish_reasons": "string[]",
    "gen_ai.response.status": "string",
    "gen_ai.response.time_to_first_chunk": "double",
    "gen_ai.usage.input_tokens": "int",
    "gen_ai.usage.cache_read.input_tokens": "int",
    "gen_ai.usage.cache_write.input_tokens": "int",
    "gen_ai.usage.text.input_tokens": "int",
    "gen_ai.usage.image.input_tokens": "int",
    "gen_ai.usage.audio.input_tokens": "int",
    "gen_ai.usage.output_tokens": "int",
    "gen_ai.usage.reasoning.output_tokens": "int",
    "gen_ai.usage.text.output_tokens": "int",
    "gen_ai.usage.image.output_tokens": "int",
    "gen_ai.usage.audio.output_tokens": "int",
    "gen_ai.usage.text.cache_read.input_tokens": "int",
    "gen_ai.usage.image.cache_read.input_tokens": "int",
    "gen_ai.usage.audio.cache_read.input_tokens": "int",
    "gen_ai.token.modality": "string",
    "gen_ai.conversation.id": "string",
    "gen_ai.conversation.compacted": "boolean",
    "gen_ai.agent.id": "string",
    "gen_ai.agent.name": "string",
    "gen_ai.agent.description": "string",
    "gen_ai.agent.version": "string",
    "gen_ai.main_agent.id": "string",
    "gen_ai.main_agent.name": "string",
    "gen_ai.main_agent.description": "string",
    "gen_ai.tool.name": "string",
    "gen_ai.tool.call.id": "string",
    "gen_ai.tool.description": "string",
    "gen_ai.tool.type": "string",
    "gen_ai.tool.call.arguments": "any",
    "gen_ai.tool.call.result": "any",
    "gen_ai.tool.definitions": "any",
    "gen_ai.data_source.id": "string",
    "gen_ai.operation.name": "string",
    "gen_ai.output.type": "string",
    "gen_ai.embeddings.dimension.count": "int",
    "gen_ai.retrieval.documents": "any",
    "gen_ai.retrieval.query.text": "string",
    "gen_ai.retrieval.top_k": "int",
    "gen_ai.memory.store.id": "string",
    "gen_ai.memory.record.id": "string",
    "gen_ai.memory.record.count": "int",
    "gen_ai.memory.query.text": "string",
    "gen_ai.memory.records": "any",
    "gen_ai.system_instructions": "any",
    "gen_ai.input.messages": "any",
    "gen_ai.output.messages": "any",
    "gen_ai.evaluation.name": "string",
    "gen_ai.evaluation.score.value": "double",
    "gen_ai.evaluation.score.label": "string",
    "gen_ai.evaluation.explanation": "string",
    "gen_ai.prompt.name": "string",
    "gen_ai.prompt.version": "string",
    "gen_ai.prompt.variable.": "string",
    "gen_ai.workflow.name": "string",
    "gen_ai.skill.name": "string",
    "gen_ai.skill.description": "string",
    "gen_ai.skill.source.uri": "string",
    "gen_ai.skill.resource.name": "string",
}
# the OpenAI refinement (docs/gen-ai/openai.md)
OPENAI: dict[str, str] = {
    "openai.api.type": "string",
    "openai.request.service_tier": "string",
    "openai.response.service_tier": "string",
    "openai.response.system_fingerprint": "string",
}
CORE: dict[str, str] = {
    server_attributes.SERVER_ADDRESS: "string",
    server_attributes.SERVER_PORT: "int",
    error_attributes.ERROR_TYPE: "string",
    http_attributes.HTTP_RESPONSE_STATUS_CODE: "int",
}
KEYS = GEN_AI | OPENAI | CORE

# well-known values (a custom value MAY be used where none applies)
PROVIDERS = frozenset(
    (
        "openai",
        "gcp.gen_ai",
        "gcp.vertex_ai",
        "gcp.gemini",
        "anthropic",
        "cohere",
        "azure.ai.inference",
        "azure.ai.foundry",
        "azure.ai.openai",
        "ibm.watsonx.ai",
        "aws.bedrock",
        "perplexity",
        "x_ai",
        "deepseek",
        "groq",
        "mistral_ai",
        "moonshot_ai",
    )
)
OPERATIONS = frozenset(
    (
        "chat",
        "generate_content",
        "text_completion",
        "embeddings",
        "retrieval",
        "fetch_response",
        "create_agent",
        "invoke_agent",
        "execute_tool",
        "invoke_workflow",
        "plan",
        "search_memory",
        "create_memory",
        "update_memory",
        "upsert_memory",
        "delete_memory",
        "create_memory_store",
        "delete_memory_store",
    )
)
OUTPUT_TYPES = frozenset(("text", "json", "image", "speech"))
OPENAI_API_TYPES = frozenset(("chat_completions", "responses"))

# names the conventions retired, and what replaced them
RETIRED = {
    "gen_ai.system": "gen_ai.provider.name",
    "gen_ai.usage.prompt_tokens": "gen_ai.usage.input_tokens",
    "gen_ai.usage.completion_tokens": "gen_ai.usage.output_tokens",
    "gen_ai.usage.cache_creation.input_tokens": "gen_ai.usage.cache_write.input_tokens",
    "gen_ai.openai.request.response_format": "gen_ai.output.type",
    "gen_ai.openai.request.seed": "gen_ai.request.seed",
    "gen_ai.openai.request.service_tier": "openai.request.service_tier",
    "gen_ai.openai.response.service_tier": "openai.response.service_tier",
    "gen_ai.openai.response.system_fingerprint": "openai.response.system_fingerprint",
    "gen_ai.token.type": "gen_ai.client.inference.* metrics (semantic-conventions-genai#374)",
}
# keys of GEN_AI the installed package does not know yet
LAGGING = frozenset(
    (
        "gen_ai.usage.cache_write.input_tokens",
        "gen_ai.request.reasoning.level",
        "gen_ai.request.previous_response.id",
    )
)


def known(key: str) -> str | None:
    """The conventions' type of `key`, or None when they have no such key."""
    if key in KEYS:
        return KEYS[key]
    return next((kind for prefix, kind in GEN_AI.items() if prefix.endswith(".") and key.startswith(prefix)), None)
