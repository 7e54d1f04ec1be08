"""Pure translators: the bytes of one LLM API exchange in, a canonical record out.

Nothing here does I/O, imports mitmproxy, or touches a database; the addon, the importers
and `llmtap decode` all feed bytes in and take `Exchange` records out. The one exception
type that may leave this package is `DecodeError`. Beside the translators, the request's
own facts every source reads alike: its headers (headers.py), which credential is its key
(api_keys.py), which provider bills it and whether its host may (providers.py, hosts.py,
provider_list.py).

The names below are imported when first asked for (PEP 562): a command that needs one
module of the package (a report's config reads providers.py) does not import every
translator with it (0.1 s of a report's start).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llmtap.protocols.canonical import Exchange, RequestFacts, ToolCall, Usage
    from llmtap.protocols.errors import DecodeError
    from llmtap.protocols.exchange import ExchangeDecoder, decode_exchange
    from llmtap.protocols.routing import PROTOCOLS, provider_for, route

# each name of __all__ -> the module of this package that defines it
_HOMES = {
    "Exchange": "canonical",
    "RequestFacts": "canonical",
    "ToolCall": "canonical",
    "Usage": "canonical",
    "DecodeError": "errors",
    "ExchangeDecoder": "exchange",
    "decode_exchange": "exchange",
    "PROTOCOLS": "routing",
    "provider_for": "routing",
    "route": "routing",
}

__all__ = [
    "PROTOCOLS",
    "DecodeError",
    "Exchange",
    "ExchangeDecoder",
    "RequestFacts",
    "ToolCall",
    "Usage",
    "decode_exchange",
    "provider_for",
    "route",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value  # asked once
    return value
