"""Stored bodies: compressed, content-addressed, with a conversation's prefix stored once.

A request body is split into a manifest and blobs: each message (and the tool list and
system prompt) is its own blob named by the SHA-256 of its canonical JSON, so turn 40 of
an agent run stores only what is new since turn 39. Responses are one blob each.
Secrets are redacted before hashing; large base64 media can be dropped.

Not responsible for deciding whether bodies are kept (the body mode) or for SQL.
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass
from typing import Any

from llmtap.storage.secrets import scrub

if sys.version_info >= (3, 14):
    from compression import zstd
else:
    from backports import zstd

# Keys whose list elements become blobs of their own, per protocol's request shape.
_LIST_KEYS = ("messages", "input", "contents")
_PART_KEYS = ("tools", "system", "instructions", "systemInstruction", "system_instruction")
MEDIA_LIMIT = 32 * 1024  # base64 strings longer than this are media, dropped when asked


@dataclass(frozen=True, slots=True)
class Blob:
    hash: str
    data: bytes  # uncompressed

    def row(self) -> dict[str, Any]:
        return {"hash": self.hash, "encoding": "zstd", "size": len(self.data), "data": compress(self.data)}


def compress(data: bytes) -> bytes:
    return zstd.compress(data, level=3)


def decompress(data: bytes, encoding: str) -> bytes:
    if encoding == "zstd":
        return zstd.decompress(data)
    if encoding == "identity":
        return data
    raise ValueError(f"unknown body encoding {encoding!r}")


def blob(data: bytes) -> Blob:
    return Blob(hashlib.sha256(data).hexdigest(), data)


def _canonical(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode("utf-8", "surrogatepass")


def split_request(body: bytes, headers: list[tuple[str, str]], drop_media: bool) -> list[Blob]:
    """The blobs of a request body; the first is its manifest."""
    try:
        parsed = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        parsed = None
    if not isinstance(parsed, dict):
        raw = blob(scrub(body.decode("utf-8", "replace")).encode("utf-8"))
        manifest = {"v": 1, "kind": "raw", "blob": raw.hash, "headers": headers}
        return [blob(_canonical(manifest)), raw]
    parts: list[Blob] = []
    skeleton: dict[str, Any] = {}
    for key, value in parsed.items():
        if drop_media:
            value = drop_large_media(value)
        if key in _LIST_KEYS and isinstance(value, list):
            refs = []
            for element in value:
                piece = blob(scrub(_canonical(element).decode("utf-8")).encode("utf-8"))
                parts.append(piece)
                refs.append(piece.hash)
            skeleton[key] = {"$blobs": refs}
        elif key in _PART_KEYS and value:
            piece = blob(scrub(_canonical(value).decode("utf-8")).encode("utf-8"))
            parts.append(piece)
            skeleton[key] = {"$blob": piece.hash}
        else:
            skeleton[key] = value
    manifest = {"v": 1, "kind": "json", "body": json.loads(scrub(json.dumps(skeleton))), "headers": headers}
    return [blob(_canonical(manifest)), *parts]


def response_blob(body: bytes) -> Blob:
    return blob(scrub(body.decode("utf-8", "replace")).encode("utf-8"))


def join_request(manifest: bytes, load: Any) -> tuple[bytes, list[tuple[str, str]]]:
    """Rebuild a request body from its manifest; `load(hash) -> bytes` fetches blobs.

    The result is equivalent JSON (same values, canonical spacing), not the original bytes.
    """
    meta = json.loads(manifest)
    headers = [tuple(h) for h in meta.get("headers") or []]
    if meta.get("kind") == "raw":
        return load(meta["blob"]), headers
    body = {}
    for key, value in meta["body"].items():
        if isinstance(value, dict) and "$blobs" in value:
            body[key] = [json.loads(load(h)) for h in value["$blobs"]]
        elif isinstance(value, dict) and "$blob" in value:
            body[key] = json.loads(load(value["$blob"]))
        else:
            body[key] = value
    return json.dumps(body, ensure_ascii=False).encode("utf-8"), headers


def drop_large_media(value: Any) -> Any:
    """The value with long base64 payloads (images, documents, audio) replaced by a note."""
    if isinstance(value, dict):
        return {k: _drop(k, v) for k, v in value.items()}
    if isinstance(value, list):
        return [drop_large_media(v) for v in value]
    return value


def _drop(key: str, value: Any) -> Any:
    if isinstance(value, str) and len(value) > MEDIA_LIMIT:
        if key in ("data", "image_url", "url", "file_data", "b64_json") and _looks_base64(value):
            return {
                "llmtap_dropped": "media",
                "chars": len(value),
                "sha256": hashlib.sha256(value.encode()).hexdigest(),
            }
    return drop_large_media(value)


def _looks_base64(value: str) -> bool:
    head = value[:256].split(",", 1)[-1] if value.startswith("data:") else value[:256]
    return all(c.isalnum() or c in "+/=_-\n" for c in head)
