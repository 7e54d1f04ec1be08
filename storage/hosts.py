"""Which hosts' answers may be billed (SPEC §4): the providers' own API hosts.

A reply is priced by the model and usage it claims, so a server anyone can stand up
(`https://my-box.example/v1/messages`) could bill a team whatever it likes. Only traffic
to a host in this table, or to an upstream the operator configured (the proxy knows
those; see `addon/attribution.py`), is priced; any other is recorded as `unpriced` with
the reason `unverified_host`.

`destination` names where an exchange went (scheme, host and port of the server the
proxy talked to, the same for every source), so that a follow-up of background work can
be matched to a POST that went to the same place.

Not responsible for routing (protocols) or for the prices (analytics/pricing.py).
"""

from __future__ import annotations

import re

UNVERIFIED_HOST = "unverified_host"  # the `price_reason` of traffic to any other host

# The providers' documented API endpoints. Keep it small: a host here is trusted to
# report the usage it is billed by. Wildcards only where the provider puts a region or a
# resource name in the host, always under a domain the provider owns.
PROVIDER_HOSTS = frozenset(
    (
        "api.anthropic.com",
        "api.openai.com",
        "generativelanguage.googleapis.com",
        "aiplatform.googleapis.com",
        "openrouter.ai",
        "api.deepseek.com",
        "api.mistral.ai",
        "api.groq.com",
        "api.x.ai",
    )
)
PROVIDER_PATTERNS = re.compile(
    r"[a-z0-9-]+-aiplatform\.googleapis\.com"  # Vertex AI: us-central1-aiplatform.googleapis.com
    r"|bedrock-runtime(?:-fips)?\.[a-z0-9-]+\.amazonaws\.com"  # Bedrock: bedrock-runtime.us-east-1.amazonaws.com
    r"|[a-z0-9-]+\.openai\.azure\.com"  # Azure OpenAI: RESOURCE.openai.azure.com
    r"|[a-z0-9-]+\.cognitiveservices\.azure\.com"  # Azure AI services: RESOURCE.cognitiveservices.azure.com
    r"|[a-z0-9-]+\.services\.ai\.azure\.com"  # Azure AI Foundry: RESOURCE.services.ai.azure.com
)


def provider_host(host: str | None) -> bool:
    """The host (a name, or `name:port`) is one of the providers' API hosts."""
    if not host:
        return False
    name = host.strip().lower()
    if name.startswith("["):  # an IPv6 literal is never a provider's name
        return False
    name = name.rpartition(":")[0] if ":" in name else name
    name = name.rstrip(".")
    return name in PROVIDER_HOSTS or PROVIDER_PATTERNS.fullmatch(name) is not None


DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


def destination(scheme: str | None, host: str | None, port: int | None = None) -> str | None:
    """Where an exchange went, as one comparable string: `scheme://host:port` (host in
    lower case, an IPv6 literal in brackets, the scheme's default port when none is
    given). None without a host. The proxy and every importer name a server this way, so
    a follow-up and its POST compare equal exactly when they reached the same server."""
    if not host:
        return None
    name = host.strip().lower().rstrip(".")
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    kind = (scheme or "https").strip().lower()
    number = port if port else DEFAULT_PORTS.get(kind, 443)
    return f"{kind}://[{name}]:{number}" if ":" in name else f"{kind}://{name}:{number}"
