"""`[otlp]` of the config file and `--otlp-endpoint`: the endpoint and how spans travel to
it, checked and made into plain, picklable values (`ExportOptions`, which the writer's
process gets inside its WriterSpec).

    [otlp]
    endpoint = "http://127.0.0.1:4318/v1/traces"   # a bare host:port gets /v1/traces
    headers = { authorization = "Bearer …" }         # sent with each export, never logged
    compression = "gzip"                             # or "none"
    max_queue = 20000                                # spans held while the endpoint is away
    batch_size = 512
    hold_seconds = 300                               # how long one batch is retried
    timeout_seconds = 10                             # one request
    service_name = "llmtap"

Kept apart from the sending (otlp_export.py) so that reading a config does not import the
OpenTelemetry SDK. Not responsible for what spans say or how they travel.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import AfterValidator, SecretStr

from llmtap.config.section import Positive, PositiveNumber, Section, parse, revealed


@dataclass(frozen=True)
class ExportOptions:
    endpoint: str
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # a token, maybe
    compression: str = "gzip"  # gzip | none
    timeout_s: float = 10.0  # one request, with the SDK's own quick retries
    hold_s: float = 300.0  # how long a batch is retried before it is given up
    max_queue: int = 20_000  # spans waiting while the endpoint is away, at most
    batch_size: int = 512
    delay_ms: int = 1000  # the processor's wait before it sends what it has
    service_name: str = "llmtap"

    @property
    def shown(self) -> str:
        """The endpoint as logs print it: no user, password or query (they may hold a token)."""
        parts = urlsplit(self.endpoint)
        place = (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
        return urlunsplit((parts.scheme, place, parts.path, "", ""))


_DEFAULTS = ExportOptions(endpoint="")


@dataclass(frozen=True)
class OtlpSettings:
    endpoint: str
    options: ExportOptions


def endpoint_url(text: str) -> str:
    """An OTLP/HTTP traces URL; one without a path gets the signal's default, /v1/traces."""
    try:
        parts = urlsplit(text.strip())
        parts.port  # noqa: B018 - a bad port raises here
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        shown = text if "@" not in text else "a URL with credentials"  # a password is never printed
        raise ValueError(f"must be an http:// or https:// URL, not {shown!r}")
    path = parts.path if parts.path not in ("", "/") else "/v1/traces"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def _named(headers: dict[str, SecretStr]) -> dict[str, SecretStr]:
    for name in headers:
        if not name.strip():
            raise ValueError("must name each header")
    return headers


class OtlpSection(Section):
    """`[otlp]` as the config file has it; the keys are ExportOptions' (`_s` spelt `_seconds`)."""

    endpoint: Annotated[str | None, AfterValidator(endpoint_url)] = None
    headers: Annotated[dict[str, SecretStr], AfterValidator(_named)] = {}  # a collector's token, maybe
    compression: Literal["gzip", "none"] = "gzip"
    max_queue: Positive = _DEFAULTS.max_queue
    batch_size: Positive = _DEFAULTS.batch_size
    hold_seconds: PositiveNumber = _DEFAULTS.hold_s
    timeout_seconds: PositiveNumber = _DEFAULTS.timeout_s
    service_name: str = _DEFAULTS.service_name


def settings_from(
    flag: str | None,
    section: OtlpSection | Mapping[str, Any] | None,
    headers: tuple[tuple[str, str], ...] | None = None,
) -> OtlpSettings | None:
    """`headers` (from `headers_from`) replace the table's. Raises ValueError with a
    one-line message (a header's value is never in it)."""
    if flag is None and section is None:
        return None
    table = parse(OtlpSection, section if section is not None else {}, ("otlp",))
    if flag is not None:
        try:
            endpoint = endpoint_url(flag)
        except ValueError as exc:
            raise ValueError(f"--otlp-endpoint {exc}") from None
    elif table.endpoint is None:
        raise ValueError("[otlp] needs endpoint = URL (or give --otlp-endpoint URL)")
    else:
        endpoint = table.endpoint
    options = ExportOptions(
        endpoint=endpoint,
        headers=headers if headers is not None else headers_from(table.headers),
        compression=table.compression,
        timeout_s=table.timeout_seconds,
        hold_s=table.hold_seconds,
        max_queue=table.max_queue,
        batch_size=table.batch_size,
        service_name=table.service_name,
    )
    return OtlpSettings(endpoint, options)


def headers_from(given: Mapping[str, SecretStr | str] | Iterable[str]) -> tuple[tuple[str, str], ...]:
    """Header (name, value) pairs from a table's or from `NAME=VALUE` texts, as `llmtap
    export --header` takes them; names in lower case."""
    if isinstance(given, Mapping):
        pairs = [(str(name), str(revealed(value))) for name, value in given.items()]
    else:
        pairs = []
        for text in given:
            name, sep, value = str(text).partition("=")
            if not sep or not name.strip():
                raise ValueError("--header wants NAME=VALUE (a value is never printed)")
            pairs.append((name, value))
    return tuple((name.strip().lower(), value) for name, value in pairs)
