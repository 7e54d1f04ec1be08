"""What the client of an LLM API gets when the upstream never answered: a 502 (refused,
unreachable, a name that does not resolve, a TLS handshake that failed, a connection
closed before any response) or a 504 (no response headers within the proxy's upstream
timeout, or a connect the system gave up on), as a JSON body in the error shape of the
request's own protocol, so an SDK raises its usual API error (and retries a 5xx as it
would) instead of a connection error with no word of the cause.

The shapes, from each provider's documented error body:
- Anthropic: `{"type": "error", "error": {"type": "api_error" | "timeout_error", "message"}}`
  (https://docs.anthropic.com/en/api/errors; 504 is `timeout_error`).
- OpenAI Chat and Responses: `{"error": {"message", "type", "param", "code"}}`
  (https://platform.openai.com/docs/guides/error-codes): type `server_error`, code the
  failure's detail below.
- Gemini generateContent: `{"error": {"code": 502 | 504, "message", "status": "UNAVAILABLE" |
  "DEADLINE_EXCEEDED"}}` (https://ai.google.dev/gemini-api/docs/troubleshooting); the
  Interactions API's is `{"error": {"code": "<string>", "message"}}`.
- Bedrock Converse: `{"message"}` with `x-amzn-ErrorType` (ServiceUnavailableException, or
  ModelTimeoutException for a timeout).

`detail` (`upstream_unreachable`, `upstream_timeout`) is the record's `error_code`
whatever the protocol: the errors report counts these as server errors (their status is
a 5xx), and it tells an answer from the proxy apart from one the provider sent.

Not responsible for noticing the failure (answering.py) or recording it (recorder.py).
"""

from __future__ import annotations

import errno
import json
import os
import re
from dataclasses import dataclass

UNREACHABLE = "upstream_unreachable"
TIMEOUT = "upstream_timeout"
HEADER = "x-llmtap-error"  # on the answer: says the proxy made it, not the provider


@dataclass(frozen=True, slots=True)
class Failure:
    """Why the upstream gave no response: its address, the detail, and the reason in words."""

    host: str
    port: int
    detail: str  # UNREACHABLE or TIMEOUT
    reason: str  # "connection refused", "no response within 30 s", ...

    @property
    def status(self) -> int:
        return 504 if self.detail == TIMEOUT else 502

    @property
    def what(self) -> str:
        return "timed out" if self.detail == TIMEOUT else "unreachable"

    def message(self) -> str:
        return f"llmtap: upstream {self.host}:{self.port} {self.what}: {self.reason}"


_ERRNO = re.compile(r"\[Errno (-?\d+)\]")


def failure(host: str, port: int, error: str) -> Failure:
    """A failed connection as mitmproxy words it (`[Errno 111] Connect call failed ...`,
    `[Errno -2] Name or service not known`, `TLS handshake failed`, ...), classified."""
    found = _ERRNO.search(error)
    number = int(found.group(1)) if found else None
    if number is not None and number > 0:
        error = f"{os.strerror(number)} ({error})"  # `Connect call failed` names no cause
    low = error.lower()
    if number == errno.ETIMEDOUT or "timed out" in low or "timeout" in low:
        return Failure(host, port, TIMEOUT, "the connection timed out")
    if number == errno.ECONNREFUSED or "refused" in low:
        reason = "connection refused"
    elif "name or service not known" in low or "nodename nor servname" in low or "name resolution" in low:
        reason = f"the name {host} does not resolve"
    elif "tls" in low or "ssl" in low or "certificate" in low:
        reason = f"TLS failed ({_first_line(error)})"
    elif "unreachable" in low:
        reason = "host unreachable" if number == errno.EHOSTUNREACH else "network unreachable"
    else:
        reason = _first_line(error) or "no response"
    return Failure(host, port, UNREACHABLE, reason)


def timed_out(host: str, port: int, seconds: float) -> Failure:
    return Failure(host, port, TIMEOUT, f"no response within {seconds:g} s")


def answer(protocol: str, found: Failure) -> tuple[int, bytes, dict[str, str]]:
    """(status, body, headers) of the answer for a request of `protocol`."""
    status, message = found.status, found.message()
    headers = {"content-type": "application/json", HEADER: found.detail}
    body: object
    if protocol.startswith("anthropic."):
        kind = "timeout_error" if found.detail == TIMEOUT else "api_error"
        body = {"type": "error", "error": {"type": kind, "message": message}}
    elif protocol.startswith("openai."):
        body = {"error": {"message": message, "type": "server_error", "param": None, "code": found.detail}}
    elif protocol == "gemini.interactions":
        body = {"error": {"code": found.detail, "message": message}}
    elif protocol.startswith("gemini."):
        google = "DEADLINE_EXCEEDED" if found.detail == TIMEOUT else "UNAVAILABLE"
        body = {"error": {"code": status, "message": message, "status": google}}
    elif protocol.startswith("bedrock."):
        kind = "ModelTimeoutException" if found.detail == TIMEOUT else "ServiceUnavailableException"
        headers["x-amzn-errortype"] = kind
        body = {"message": message}
    else:
        body = {"error": {"message": message, "type": "server_error", "code": found.detail}}
    return status, json.dumps(body, ensure_ascii=False).encode(), headers


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0][:200] if lines else ""
