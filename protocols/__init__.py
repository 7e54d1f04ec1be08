"""Pure translators: the bytes of one LLM API exchange in, a canonical record out.

Nothing here does I/O, imports mitmproxy, or touches a database; the addon, the importers
and `llmtap decode` all feed bytes in and take `Exchange` records out. The one exception
type that may leave this package is `DecodeError`. Beside the translators, the request's
own facts every source reads alike: its headers (headers.py), which credential is its key
(api_keys.py), which provider bills it and whether its host may (providers.py, hosts.py,
provider_list.py).
"""

from llmtap.protocols.canonical import Exchange, RequestFacts, ToolCall, Usage
from llmtap.protocols.errors import DecodeError
from llmtap.protocols.exchange import ExchangeDecoder, decode_exchange
from llmtap.protocols.routing import PROTOCOLS, provider_for, route

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
