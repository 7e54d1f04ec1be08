"""What a provider's error type or code says went wrong, for the errors report: a rate
limit, an overloaded service, a failure of the server, or a request it refused.

The HTTP status of an error answer says as much (429, 5xx, 529); this table says it for
the errors that arrive without one, as an event in the middle of a 200 stream (an
Anthropic `overloaded_error`, a Responses `response.failed`, a Gemini error chunk). Each
kind is the one the provider's own status for that error would give.

Not responsible for reading errors off the wire (each translator does, into
`Exchange.error`) or for the report's SQL (analytics/sql/errors.sql, which the analytics
splice these lists into).
"""

from __future__ import annotations

from typing import Literal

ErrorKind = Literal["rate_limited", "overloaded", "server_error", "request_error"]

# One `error.type`, `error.code` or Google `error.status` per line, by provider.
ERROR_KINDS: dict[str, ErrorKind] = {
    # Anthropic `error.type`, by its documented status: https://docs.anthropic.com/en/api/errors
    "invalid_request_error": "request_error",  # 400 (OpenAI's type too)
    "authentication_error": "request_error",  # 401
    "billing_error": "request_error",  # 402
    "permission_error": "request_error",  # 403
    "not_found_error": "request_error",  # 404
    "request_too_large": "request_error",  # 413
    "rate_limit_error": "rate_limited",  # 429
    "api_error": "server_error",  # 500
    "timeout_error": "server_error",  # 504
    "overloaded_error": "overloaded",  # 529
    # OpenAI `error.type` / `error.code` (Chat errors, Responses `response.error.code`):
    # https://platform.openai.com/docs/guides/error-codes and
    # https://platform.openai.com/docs/api-reference/responses/object#responses/object-error
    "rate_limit_exceeded": "rate_limited",
    "insufficient_quota": "rate_limited",  # a 429 too
    "server_error": "server_error",
    "vector_store_timeout": "server_error",
    "invalid_prompt": "request_error",
    "bio_policy": "request_error",
    "misalignment_policy_violation": "request_error",
    "data_residency_mismatch": "request_error",
    "image_content_policy_violation": "request_error",
    "invalid_image": "request_error",
    "invalid_image_format": "request_error",
    "invalid_base64_image": "request_error",
    "invalid_image_url": "request_error",
    "image_too_large": "request_error",
    "image_too_small": "request_error",
    "image_parse_error": "request_error",
    "invalid_image_mode": "request_error",
    "image_file_too_large": "request_error",
    "unsupported_image_media_type": "request_error",
    "empty_image_file": "request_error",
    "failed_to_download_image": "request_error",
    "image_file_not_found": "request_error",
    # Google `error.status` (google.rpc.Code), by its HTTP mapping:
    # https://ai.google.dev/gemini-api/docs/troubleshooting and
    # https://cloud.google.com/apis/design/errors#handling_errors
    "CANCELLED": "request_error",  # 499, the client cancelled
    "INVALID_ARGUMENT": "request_error",  # 400
    "FAILED_PRECONDITION": "request_error",  # 400
    "OUT_OF_RANGE": "request_error",  # 400
    "UNAUTHENTICATED": "request_error",  # 401
    "PERMISSION_DENIED": "request_error",  # 403
    "NOT_FOUND": "request_error",  # 404
    "ABORTED": "request_error",  # 409
    "ALREADY_EXISTS": "request_error",  # 409
    "RESOURCE_EXHAUSTED": "rate_limited",  # 429
    "UNKNOWN": "server_error",  # 500
    "INTERNAL": "server_error",  # 500
    "DATA_LOSS": "server_error",  # 500
    "UNIMPLEMENTED": "server_error",  # 501
    "UNAVAILABLE": "overloaded",  # 503, "the model is overloaded"
    "DEADLINE_EXCEEDED": "server_error",  # 504
    # AWS Bedrock error types (`__type`, `x-amzn-ErrorType`):
    # https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html#API_runtime_Converse_Errors
    "ValidationException": "request_error",  # 400
    "AccessDeniedException": "request_error",  # 403
    "ResourceNotFoundException": "request_error",  # 404
    "ConflictException": "request_error",  # 400
    "ModelErrorException": "server_error",  # 424, the model failed
    "ThrottlingException": "rate_limited",  # 429
    "ServiceQuotaExceededException": "rate_limited",  # 400, the account's quota
    "ModelNotReadyException": "overloaded",  # 429, not ready to serve: retry
    "ServiceUnavailableException": "overloaded",  # 503
    "InternalServerException": "server_error",  # 500
    "ModelStreamErrorException": "server_error",  # 424 mid-stream
    "ModelTimeoutException": "server_error",  # 408
}


def kinds(*wanted: ErrorKind) -> tuple[str, ...]:
    """The error types and codes of the kinds `wanted`, in the table's order."""
    return tuple(name for name, kind in ERROR_KINDS.items() if kind in wanted)
