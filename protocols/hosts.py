"""Which hosts' answers may be billed (SPEC §4): the providers' own API hosts.

A reply is priced by the model and usage it claims, so a server anyone can stand up
(`https://my-box.example/v1/messages`) could bill a team whatever it likes. Only traffic
to a provider's API host, to a host a `[[providers]]` entry of the config names
(protocols/providers.py), or to an upstream the operator configured (the proxy knows
those; see `addon/attribution.py`) is priced; any other is recorded as `unpriced` with
the reason `unverified_host`.

A provider's API host is one of two kinds:

- a host genai-prices' provider list names (protocols/provider_list.py) with a pattern
  that fixes the name: `https://api\\.mistral\\.ai`, `https://(api\\.)?openrouter\\.ai`.
  A pattern with a label anyone may choose (`https://[^/]+\\.modal\\.run`: every Modal
  app, whoever deployed it; `[^.]*\\.azure-api\\.net`: an API Management gateway whose
  owner writes its policies; `https://api\\.moonshot\\.` with any top-level domain; a
  Databricks workspace, which serves its owner's own models) names the provider but
  bills no one: a stranger can stand up such a host and answer what they like.
- a cloud's regional or resource endpoint (`CLOUD_HOSTS`): a name the cloud makes
  from a region or a customer's resource, under a domain where only the cloud's own
  inference service answers (Bedrock's runtime, Vertex AI and the Gemini API on
  googleapis.com, an Azure OpenAI or AI Foundry resource). Which of a cloud's names its
  service alone answers is not something genai-prices' patterns say (its Google pattern
  is every googleapis.com host, Cloud Storage buckets included), so that short table is
  ours.

`destination` names where an exchange went (scheme, host and port of the server the
proxy talked to, the same for every source), so that a follow-up of background work can
be matched to a POST that went to the same place.

Pure functions of a request's host and genai-prices' list, shared by the proxy
(addon/attribution.py), the importers (storage/ingest.py), reports and budgets.

Not responsible for routing (protocols/routing.py), for naming providers
(protocols/providers.py), for the prices (analytics/pricing.py), or for storing the
verdict (storage/ keeps `price_reason` and `destination` as they are given).
"""

from __future__ import annotations

import ipaddress
import re

from llmtap.protocols import provider_list

UNVERIFIED_HOST = "unverified_host"  # the `price_reason` of traffic to any other host

# The clouds' endpoints made of a region or a resource name. Keep it small: a host here
# is trusted to report the usage it is billed by.
CLOUD_HOSTS = re.compile(
    # Bedrock's runtime: bedrock-runtime.us-east-1.amazonaws.com, …-fips.us-gov-west-1…
    # https://docs.aws.amazon.com/general/latest/gr/bedrock.html
    r"bedrock-runtime(?:-fips)?\.[a-z0-9-]+\.amazonaws\.com"
    # Gemini API and Vertex AI: https://ai.google.dev/api and
    # https://cloud.google.com/vertex-ai/docs/reference/rest#service-endpoint
    r"|generativelanguage\.googleapis\.com"
    r"|(?:[a-z0-9-]+-)?aiplatform\.googleapis\.com"
    # Azure OpenAI and AI Foundry resources: RESOURCE.openai.azure.com, …
    # https://learn.microsoft.com/en-us/azure/ai-foundry/openai/reference
    r"|[a-z0-9-]+\.(?:openai\.azure\.com|cognitiveservices\.azure\.com|services\.ai\.azure\.com)"
)

MAX_NAME = 253  # a DNS name's length (RFC 1035): a longer "host" names nothing
_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")


def bare_host(host: str | None) -> str:
    """A request's host as one comparable name: lower case, without a port, a user part
    or a trailing dot (`API.Mistral.ai:443` → `api.mistral.ai`); an IPv6 literal keeps
    its brackets. Empty without a host."""
    name = (host or "").strip().lower().rpartition("@")[2]
    if name.startswith("["):
        return name.partition("]")[0] + "]" if "]" in name else name
    if name.count(":") == 1:
        name = name.partition(":")[0]
    return name.rstrip(".")


def dns_name(host: str | None) -> str | None:
    """The host as a DNS name (`bare_host`), or None when it is none: empty, too long,
    an IP literal, or with characters no host name has (a look-alike in another script,
    a regular expression's). Only a DNS name is looked up in the provider list."""
    name = bare_host(host)
    if not name or len(name) > MAX_NAME or name.startswith("["):
        return None
    labels = name.split(".")
    if not all(_LABEL.fullmatch(label) for label in labels) or labels[-1].isdigit():
        return None
    return name


def nameless(host: str | None) -> bool:
    """No host, `localhost`, or an IP address: a host that names no provider."""
    name = bare_host(host)
    if not name or name == "localhost" or name.startswith("["):
        return True
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def provider_host(host: str | None) -> bool:
    """The host (a name, or `name:port`) is one of the providers' API hosts (see the
    module's docstring): a fixed name of genai-prices' provider list, or a cloud's
    regional or resource endpoint."""
    name = dns_name(host)
    if name is None:
        return False
    if CLOUD_HOSTS.fullmatch(name):
        return True
    listed = provider_list.listed(name)
    return listed is not None and listed.fixed


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
