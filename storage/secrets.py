"""API keys: find them, fingerprint them with a local secret, and redact them everywhere.

A key is never stored, logged or shown (SPEC §4): the store keeps an HMAC-SHA256
fingerprint keyed with a secret that lives in an owner-only file (one secret per store,
which keeps only its verifier: `store_secret.py`), and the key's last four characters.
Every header and query parameter whose name says it carries a credential (`secret_name`:
the API keys, and AWS session tokens, gateways' auth headers, cookies, a presigned URL's
signature) is redacted before anything is written; text is scrubbed of anything shaped
like a provider key; and the exact values of all of those a request carried (`Literals`,
whatever their shape) are removed from its own record.

Not responsible for deciding which team a key belongs to (the config's map does that),
nor for finding a key of no known shape in another request's record (only the request
that carried it knows its value).
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import hashlib
import hmac
import json
import os
import re
import secrets
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, quote_plus, unquote_plus

from llmtap.protocols.api_keys import request_keys
from llmtap.storage.private import open_private, private_dir

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

REDACTED = "[REDACTED]"
KEY_HEADERS = ("x-api-key", "authorization", "x-goog-api-key", "api-key", "proxy-authorization")
# A credential travels under a name that says so: a header or query parameter whose name
# holds one of these words (`X-Amz-Security-Token`, `cf-aig-authorization`,
# `x-portkey-api-key`, `helicone-auth`, `Cookie`, a presigned URL's `X-Amz-Signature` and
# `X-Amz-Credential`), or is one of the short names (an Azure SAS's `sig`). One rule for
# what is redacted where it travels and for whose exact value leaves its record.
# ("session" is no such word: a client's session id names a conversation, storage/threads.py.)
_SECRET_WORDS = ("key", "token", "secret", "auth", "cookie", "signature", "credential", "password", "passwd")
_SECRET_NAMES = frozenset(("sig", "pwd", "pass"))
# An Authorization-style value: `scheme credentials` (RFC 9110 §11.4, the scheme a token)
_SCHEME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# Shapes of provider keys, to scrub them from free text (error messages, bodies).
_KEY_SHAPES = re.compile(
    r"(sk-ant-[A-Za-z0-9_\-]{8,}|sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{16,}|AIza[A-Za-z0-9_\-]{20,}"
    r"|ya29\.[A-Za-z0-9_\-\.]{10,})"
)


def api_key(headers: Mapping[str, str] | Iterable[tuple[str, str]], query: str = "") -> str | None:
    """The first credential a request carries, its destination unknown (`api_keys.py`
    picks the one a destination reads: `request_keys`)."""
    keys = request_keys(headers, query)
    return keys[0] if keys else None


# What a secret's verifier is the HMAC of: it names the secret (a store records it, see
# `store_secret.py`) and tells nothing of it, nor lets anyone fingerprint a key.
VERIFIER_LABEL = b"llmtap fingerprint secret verifier v1"
SECRET_MIN = 32  # bytes a secret file holds at least (`load_or_create_secret` makes 64 hex digits)


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

    @property
    def verifier(self) -> str:
        """HMAC-SHA256 of VERIFIER_LABEL under the secret, in hex: what a store keeps to know
        its secret again, never the secret."""
        return hmac.new(self._secret, VERIFIER_LABEL, hashlib.sha256).hexdigest()

    @property
    def secret_id(self) -> str:
        """The verifier's first 16 hex digits: how messages, `llmtap fingerprint status` and
        each row (`key_secret_id`) name the secret."""
        return self.verifier[:16]


def load_secret(path: Path) -> bytes:
    """Read a fingerprint secret that must be there. Raises FileNotFoundError, ValueError for
    a file too short to be one, or another OSError."""
    data = path.read_bytes().strip()
    if len(data) < SECRET_MIN:
        raise ValueError(f"{path} holds no fingerprint secret (at least {SECRET_MIN} characters)")
    return data


def load_or_create_secret(path: Path) -> bytes:
    """Read the fingerprint secret, creating it (mode 0600) on first use. Processes that
    start together on one new file (a fleet's shared `secret_file`) all get the one that
    was linked into place first: it is written whole beside it, then linked (atomic, and
    refused where a file is there already); a short file is replaced."""
    try:
        data = path.read_bytes().strip()
        if len(data) >= SECRET_MIN:
            return data
    except FileNotFoundError:
        data = None
    private_dir(path.parent)
    value = secrets.token_hex(32).encode()
    draft = path.with_name(f".{path.name}.{secrets.token_hex(6)}")
    with open_private(draft, "xb") as handle:  # 0600
        handle.write(value)
    try:
        if data is None:
            os.link(draft, path)
        else:
            os.replace(draft, path)
    except FileExistsError:  # another process made it first: theirs is the one
        return load_or_create_secret(path)
    finally:
        draft.unlink(missing_ok=True)
    return value


@functools.lru_cache(maxsize=4096)  # a proxy sees a few dozen header names, on its event loop
def secret_name(name: str) -> bool:
    """Whether a header or query parameter of this name (any case, spaces around it
    ignored) carries a credential: see `_SECRET_WORDS`."""
    lowered = name.strip().lower()
    return lowered in _SECRET_NAMES or any(word in lowered for word in _SECRET_WORDS)


def redact_headers(headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """Headers with every credential-bearing value replaced."""
    out = []
    for name, value in headers:
        if secret_name(name):
            out.append((name, REDACTED))
        else:
            out.append((name, scrub(value)))
    return out


def redact_query(path: str) -> str:
    """A path whose query string has its key-bearing parameters replaced.

    Any request-target a client can send is taken, never parsed as a URL (`//[x/…` is no
    URL, yet a server may answer it): everything after the first `?` is the query, split
    at `&`; a parameter whose name, percent-decoded, is a credential's (`secret_name`:
    `key`, `access_token`, a presigned URL's `X-Amz-Signature`, …) has its whole value
    replaced (up to the next `&`, a `#` included); every other byte stays as it was sent.
    """
    bare, mark, query = path.partition("?")
    if mark:
        pairs = query.split("&")
        for index, pair in enumerate(pairs):
            name, equals, _ = pair.partition("=")
            if equals and secret_name(unquote_plus(name)):
                pairs[index] = f"{name}={REDACTED}"
        path = f"{bare}?{'&'.join(pairs)}"
    return scrub(path)


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


# -- the exact key values of one request --------------------------------------------------

# Shorter credentials are redacted where they travel (headers, query strings) but not
# hunted in free text: replacing every "x" (the README's proxy password) in a prompt would
# wreck the record, and the holes would spell out the value.
LITERAL_MIN = 6


def request_secrets(
    headers: Iterable[tuple[str | bytes, str | bytes]], query: str = "", proxy_auth: str | None = None
) -> Literals:
    """The exact credential values a request carried, whatever their shape: the value of
    every header and query parameter whose name is a credential's (`secret_name`), with
    the parts an echo may quote alone (an Authorization-style credential without its
    scheme; Basic's decoded password; SigV4's `Credential` and `Signature`; each cookie's
    value; the access key id of a `Credential`), and the password of a proxy-auth header
    that came with the request or (`proxy_auth`) its CONNECT."""
    found: list[str] = []
    for raw_name, raw_value in headers:
        name = _str(raw_name)
        if secret_name(name):
            found += _credentials(name.strip().lower(), _str(raw_value))
    if proxy_auth:
        found += _credentials("proxy-authorization", proxy_auth)
    for pair in query.split("&"):
        name, equals, value = pair.partition("=")
        name = unquote_plus(name)
        if equals and secret_name(name):
            found += [value, *_parts(name, unquote_plus(value))]
    return Literals(found)


def _str(value: str | bytes) -> str:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else value


def _credentials(name: str, value: str) -> list[str]:
    """The secret parts of one credential header's value (`name` lowered)."""
    value = value.strip()
    if name == "cookie":  # `a=1; b=2`: every cookie's value is a credential
        return [value] + [part.partition("=")[2].strip() for part in value.split(";")]
    scheme, space, credential = value.partition(" ")
    credential = credential.strip()
    if not space or not credential or not _SCHEME.fullmatch(scheme):
        return _parts(name, value)  # a bare token, no scheme
    found = [credential]  # the scheme stays readable: `Bearer [REDACTED]`
    if scheme.lower() == "basic":
        found += _basic_password(credential)
    for part in credential.split(","):  # `Name=value, …`: SigV4 (Credential, Signature), Digest
        key, equals, item = part.strip().partition("=")
        if equals and secret_name(key):
            found += _parts(key, item.strip().strip('"'))
    return found


def _parts(name: str, value: str) -> list[str]:
    """A value, and for a SigV4 `Credential` (`AKID/date/region/service/aws4_request`)
    also the access key id, which an error message may quote alone."""
    if "credential" in name.lower() and "/" in value:
        return [value, value.partition("/")[0]]
    return [value]


def _basic_password(credential: str) -> list[str]:
    try:
        decoded = base64.b64decode(credential, validate=False).decode("utf-8", "replace")
    except ValueError:
        return []
    _user, _, password = decoded.partition(":")
    return [password, unquote_plus(password)]  # the user name is a team or an account id


class Literals:
    """The exact credential values of one request, to remove from everything stored of its
    exchange (SPEC §4: "whatever their shape"), including their JSON-escaped and
    percent-encoded spellings.

    It rides with a record to the writer (in memory, or pickled over the writer
    process's pipe) and is used there once the decode has finished; it is never stored.
    Its repr, str and JSON form (via `str`) name none of the values, so a record dumped to
    a log or the rejected file cannot carry them by accident.
    """

    __slots__ = ("values", "_spellings", "_encoded", "_pattern")

    def __init__(self, values: Iterable[str] = ()) -> None:
        # Made on the proxy's event loop: only the values here; their spellings and the
        # regex wait for the first use, on the writer's side.
        self.values = tuple(sorted({v for v in values if len(v) >= LITERAL_MIN}, key=lambda v: (-len(v), v)))
        self._pattern: re.Pattern[str] | None = None
        self._spellings: tuple[str, ...] = ()
        self._encoded: tuple[bytes, ...] = ()

    def _compile(self) -> re.Pattern[str] | None:
        if self._pattern is None and self.values:
            spellings: set[str] = set()
            for value in self.values:
                spellings |= {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]}
                raw = value.encode("utf-8", "surrogateescape")  # a header's undecodable bytes too
                spellings |= {quote(raw, safe=""), quote_plus(raw, safe="")}
            self._spellings = tuple(sorted(spellings, key=len, reverse=True))  # the longest wins an overlap
            self._encoded = tuple(s.encode("utf-8", "surrogateescape") for s in self._spellings)
            self._pattern = re.compile("|".join(map(re.escape, self._spellings)))
        return self._pattern

    def __bool__(self) -> bool:
        return bool(self.values)

    def __repr__(self) -> str:
        return f"Literals({len(self.values)} redacted)"

    __str__ = __repr__

    def __reduce__(self) -> tuple[Any, ...]:
        return (Literals, (self.values,))

    def text(self, value: str) -> str:
        pattern = self._compile()
        # `in` first: a substring search is far cheaper than the regex, and most text holds no key
        if pattern is None or not value or not any(s in value for s in self._spellings):
            return value
        return pattern.sub(REDACTED, value)

    def data(self, value: bytes) -> bytes:
        pattern = self._compile()
        if pattern is None or not value or not any(s in value for s in self._encoded):
            return value
        return pattern.sub(REDACTED, value.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")

    def deep(self, value: Any) -> Any:
        """`value` with every string in it scrubbed: dataclasses in place, containers
        rebuilt only where something changed."""
        if not self.values:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, bytes):
            return self.data(value)
        if isinstance(value, list):
            items = [self.deep(v) for v in value]
            return items if any(a is not b for a, b in zip(items, value, strict=True)) else value
        if isinstance(value, tuple):
            items = [self.deep(v) for v in value]
            return tuple(items) if any(a is not b for a, b in zip(items, value, strict=True)) else value
        if isinstance(value, dict):
            pairs = [(self.deep(k), self.deep(v)) for k, v in value.items()]
            changed = any(a is not k or b is not v for (a, b), (k, v) in zip(pairs, value.items(), strict=True))
            return dict(pairs) if changed else value
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            for item in dataclasses.fields(value):
                old = getattr(value, item.name)
                new = self.deep(old)
                if new is not old:
                    setattr(value, item.name, new)
        return value


_IDENTITY = frozenset(("id", "key_fingerprint", "key_last4"))  # made by llmtap, not from the wire


def scrub_record[R: DataclassInstance](record: R, literals: Literals | None) -> R:
    """A record (a `Recorded`) with `literals` removed from everything it keeps from the
    wire: the canonical exchange (text, error, tool arguments, request facts), the bodies,
    headers, path and team. In place; returns the record."""
    if literals:
        for item in dataclasses.fields(record):
            if item.name not in _IDENTITY:
                old = getattr(record, item.name)
                new = literals.deep(old)
                if new is not old:
                    setattr(record, item.name, new)
    return record
