"""API keys: find them, fingerprint them with a local secret, and redact them everywhere.

A key is never stored, logged or shown (SPEC §4): the store keeps an HMAC-SHA256
fingerprint keyed with a secret that lives in an owner-only file, and the key's last four
characters. Headers and query strings that carry keys are redacted before anything is
written.

Not responsible for deciding which team a key belongs to (the config's map does that).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

REDACTED = "[REDACTED]"
KEY_HEADERS = ("x-api-key", "authorization", "x-goog-api-key", "api-key", "proxy-authorization")
KEY_QUERY_PARAMS = ("key", "api_key", "api-key", "access_token")
_SECRET_HEADER_WORDS = ("key", "token", "secret", "auth", "cookie", "signature", "credential")
# Shapes of provider keys, to scrub them from free text (error messages, bodies).
_KEY_SHAPES = re.compile(
    r"(sk-ant-[A-Za-z0-9_\-]{8,}|sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{16,}|AIza[A-Za-z0-9_\-]{20,}"
    r"|ya29\.[A-Za-z0-9_\-\.]{10,})"
)


def api_key(headers: Mapping[str, str] | Iterable[tuple[str, str]], query: str = "") -> str | None:
    """The API key a request carries, from its headers or its query string."""
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    found: dict[str, str] = {}
    for name, value in pairs:
        lowered = name.lower()
        if lowered in ("x-api-key", "x-goog-api-key", "api-key") and value.strip():
            found.setdefault(lowered, value.strip())
        elif lowered == "authorization":
            scheme, _, credential = value.strip().partition(" ")
            if scheme.lower() == "bearer" and credential.strip():
                found.setdefault(lowered, credential.strip())
    for name in ("x-api-key", "x-goog-api-key", "api-key", "authorization"):
        if name in found:
            return found[name]
    for name, value in parse_qsl(query, keep_blank_values=False):
        if name.lower() in KEY_QUERY_PARAMS and value:
            return value
    return None


class KeyFingerprinter:
    """HMAC fingerprints of API keys with a secret kept in an owner-only file."""

    _REMEMBERED = 1024  # a proxy sees a handful of keys; each one's HMAC is worked out once

    def __init__(self, secret: bytes) -> None:
        self._secret = secret
        self._known: dict[str, str] = {}  # in memory only, like the request that carried the key

    @classmethod
    def from_file(cls, path: Path) -> KeyFingerprinter:
        return cls(load_or_create_secret(path))

    def fingerprint(self, key: str) -> str:
        known = self._known.get(key)
        if known is None:
            known = hmac.new(self._secret, key.encode("utf-8"), hashlib.sha256).hexdigest()[:32]
            if len(self._known) >= self._REMEMBERED:
                self._known.clear()
            self._known[key] = known
        return known

    @staticmethod
    def last4(key: str) -> str:
        return key[-4:] if len(key) >= 12 else ""


def load_or_create_secret(path: Path) -> bytes:
    """Read the fingerprint secret, creating it (mode 0600) on first use."""
    try:
        data = path.read_bytes().strip()
        if len(data) >= 32:
            return data
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    value = secrets.token_hex(32).encode()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, value)
    finally:
        os.close(fd)
    os.chmod(path, 0o600)
    return value


def redact_headers(headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """Headers with every credential-bearing value replaced."""
    out = []
    for name, value in headers:
        lowered = name.lower()
        if lowered in KEY_HEADERS or any(word in lowered for word in _SECRET_HEADER_WORDS):
            out.append((name, REDACTED))
        else:
            out.append((name, scrub(value)))
    return out


def redact_query(path: str) -> str:
    """A path whose query string has its key-bearing parameters replaced."""
    parts = urlsplit(path)
    if not parts.query:
        return scrub(path)
    pairs = [
        (name, REDACTED if name.lower() in KEY_QUERY_PARAMS else value)
        for name, value in parse_qsl(parts.query, keep_blank_values=True)
    ]
    return scrub(urlunsplit(parts._replace(query=urlencode(pairs, safe="[]"))))


def scrub(text: str) -> str:
    """Free text with anything shaped like a provider key replaced."""
    return _KEY_SHAPES.sub(REDACTED, text) if text else text


def scrub_json(value: Any) -> Any:
    """A JSON value (tool schemas, request parameters, tool arguments) with every
    key-shaped string replaced; the value itself when it holds none."""
    if not value or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return scrub(value)
    text = json.dumps(value, ensure_ascii=False)
    if not _KEY_SHAPES.search(text):
        return value
    return json.loads(_KEY_SHAPES.sub(REDACTED, text))  # key shapes hold no JSON escapes
