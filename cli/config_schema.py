"""The one schema of the config file (`--config`, `$LLMTAP_CONFIG`, `~/.llmtap/config.toml`).

Every table is a model: the top level, `[teams]`, `[auth]`, `[proxy]` and `[[providers]]` here, and the
tables of the other layers beside the code that reads them (`[metrics]` telemetry/metrics.py,
`[otlp]` telemetry/otlp.py, `[budgets]` telemetry/budget_config.py, `[lake]`
lake/settings.py). A file is checked whole before any command acts on it: an unknown
table or key, or a value of the wrong type, is one usage error naming the file, the table,
the key and the closest known name (llmtap.config.problems). A key is one line in its
table's model; one the environment may set carries `Env(...)` (cli/settings.py layers
flag, environment, file, default).

    db = "postgresql://llmtap@db.internal/llmtap"
    bodies = "metadata"                 # none | metadata | full
    prices = "~/.llmtap/prices.toml"    # local prices that override or add models
    spool = "/var/lib/llmtap/spool"
    secret_file = "/etc/llmtap/fingerprint.secret"   # the store's key fingerprint secret: the same file on
                                 # every machine of one store (env LLMTAP_SECRET_FILE)
    [teams]                             # key fingerprint (`llmtap fingerprint`) -> team
    [tags."FINGERPRINT"]                # that key's tags: project = "atlas" (a listener: tags = {...})
    "9f2c…" = "search"
    [auth]                              # team -> proxy password: the proxy refuses (407) any other
    search = "a long random password"   # clients: HTTPS_PROXY=http://search:PASSWORD@host:8080
    [proxy]                             # see cli/proxy.py
    [[providers]]                       # a self-hosted or private gateway: named, billed, priced
    name = "acme-gateway"               # its `provider`
    hosts = ["llm.acme.internal", "*.gw.acme.internal"]   # exact names, IPs, or *.domain
    prices = "/etc/llmtap/acme-prices.toml"  # optional: its models' prices (a price file)
    [metrics] [otlp] [budgets] [lake]   # see their modules

Not responsible for reading the file, the environment or flags (cli/settings.py), nor for
what a setting does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, SecretStr, ValidationError

from llmtap.cli.errors import UsageError
from llmtap.config.problems import problem
from llmtap.config.section import Env, Section
from llmtap.lake.settings import LakeSection
from llmtap.protocols.providers import host_pattern, provider_name
from llmtap.protocols.who_asked import MAX_TAG_VALUE_CHARS, MAX_TAGS, TAG_NAME
from llmtap.telemetry.budget_config import BudgetsSection
from llmtap.telemetry.metrics import MetricsSection
from llmtap.telemetry.otlp_config import OtlpSection

BODY_MODES = ("none", "metadata", "full")


def _port(value: int) -> int:
    if not 0 < value < 65536:
        raise ValueError(f"must be a port number (1 to 65535), not {value!r}")
    return value


def _teams(table: dict[str, SecretStr]) -> dict[str, SecretStr]:
    """`[auth]`: a team is a Basic user name (no `:`); a password is never echoed."""
    if not table:
        raise ValueError("must name each team and its proxy password")
    for team, password in table.items():
        if not team.strip() or ":" in team or not team.isprintable():
            raise ValueError(f"team {team!r}: a name without ':' or control characters")
        if not password.get_secret_value():
            raise ValueError(f"team {team!r}: its password must be a non-empty string")
    return table


Port = Annotated[int, AfterValidator(_port)]


def _tags(table: dict[str, str]) -> dict[str, str]:
    """Tags the operator names (a listener's, a key's): the same names and values a
    client's `X-LLMTap-Tags` may carry (protocols/who_asked.py), at most as many."""
    if len(table) > MAX_TAGS:
        raise ValueError(f"at most {MAX_TAGS} tags, not {len(table)}")
    for name, value in table.items():
        if not TAG_NAME.fullmatch(name):
            raise ValueError(f"tag {name!r}: a name is 1 to 32 of a-z, 0-9, _ and -")
        if not value.strip() or len(value) > MAX_TAG_VALUE_CHARS or not value.isprintable() or "," in value:
            raise ValueError(f"tag {name!r}: a value is 1 to {MAX_TAG_VALUE_CHARS} printable characters without ','")
    return {name: value.strip() for name, value in table.items()}


Tags = Annotated[dict[str, str], AfterValidator(_tags)]


def _seconds(value: float) -> float:
    if value < 0 or value != value or value == float("inf"):
        raise ValueError(f"must be a number of seconds (0 for no limit), not {value!r}")
    return value


UPSTREAM_TIMEOUT = 600.0  # seconds: an SDK's own default (Anthropic, OpenAI: 10 minutes)


class ReverseEntry(Section):
    """One `[[proxy.reverse]]` listener."""

    provider: str  # anthropic | openai | gemini (checked with the proxy's own list: cli/proxy.py)
    port: Port
    team: str | None = None  # this listener's traffic belongs to it
    tags: Tags = {}  # and carries these tags, over any its clients send
    upstream: str | None = None  # else the provider's API


class ProxySection(Section):
    """`[proxy]`: what `llmtap proxy` listens on when its flags do not say."""

    listen_host: Annotated[str, Env("LLMTAP_LISTEN_HOST")] = "127.0.0.1"
    port: Annotated[Port | Literal[False], Env("LLMTAP_PORT")] = 8080  # false: no regular proxy
    confdir: str = "~/.mitmproxy"
    modes: list[str] = []  # mitmproxy mode specs
    reverse: Annotated[list[ReverseEntry], Env("LLMTAP_REVERSE")] = []
    # seconds an LLM request waits for the upstream's response headers, then its client gets a 504
    upstream_timeout: Annotated[float, AfterValidator(_seconds)] = UPSTREAM_TIMEOUT
    access_log: bool = False  # one line on stderr per finished exchange


def _hosts(values: list[str]) -> list[str]:
    if not values:
        raise ValueError("must name at least one host")
    return [host_pattern(value) for value in values]


class ProviderEntry(Section):
    """One `[[providers]]` entry (protocols/providers.py): traffic to its hosts is named
    `name`, may bill (the operator vouches for them), and is priced from `prices`, a
    price file (analytics/price_file.py) whose entries are this provider's; without one,
    at the model maker's list price, as any OpenAI-compatible host."""

    name: Annotated[str, AfterValidator(provider_name)]
    hosts: Annotated[list[str], AfterValidator(_hosts)]
    prices: str | None = None


def _providers(entries: list[ProviderEntry]) -> list[ProviderEntry]:
    """No name twice, and no host two entries take (the first would win unseen)."""
    names: set[str] = set()
    hosts: set[str] = set()
    for entry in entries:
        if entry.name in names:
            raise ValueError(f"name {entry.name!r} is given twice")
        names.add(entry.name)
        for host in entry.hosts:
            if host in hosts:
                raise ValueError(f"host {host!r} is in two entries")
            hosts.add(host)
    return entries


class ConfigFile(Section):
    """The whole file."""

    db: Annotated[str | None, Env("LLMTAP_DB")] = None
    bodies: Annotated[Literal["none", "metadata", "full"] | None, Env("LLMTAP_BODIES")] = None
    prices: Annotated[str | None, Env("LLMTAP_PRICES")] = None
    spool: Annotated[str | None, Env("LLMTAP_SPOOL")] = None
    secret_file: Annotated[str | None, Env("LLMTAP_SECRET_FILE")] = None  # one file on every machine of a store
    teams: dict[str, str] = {}
    tags: dict[str, Tags] = {}  # key fingerprint -> the tags of its traffic, over any a client sends
    auth: Annotated[dict[str, SecretStr], AfterValidator(_teams)] | None = None
    proxy: ProxySection = ProxySection()
    providers: Annotated[list[ProviderEntry], AfterValidator(_providers)] = []
    metrics: MetricsSection | None = None
    otlp: OtlpSection | None = None
    budgets: BudgetsSection | None = None
    lake: LakeSection = LakeSection()


def validate(path: Path | None, table: dict[str, Any]) -> ConfigFile:
    """The parsed TOML of `path` as the schema, or a usage error naming the file."""
    try:
        return ConfigFile.model_validate(table)
    except ValidationError as exc:
        raise UsageError(f"{path}: {problem(exc, ConfigFile)}") from None


def env_var(path: tuple[str, ...]) -> str | None:
    """The environment variable that sets the key at `path` (("proxy", "port")), if any."""
    model: Any = ConfigFile
    field = None
    for name in path:
        field = model.model_fields.get(name) if isinstance(model, type) and issubclass(model, BaseModel) else None
        if field is None:
            return None
        model = field.annotation
    found = [marker.name for marker in field.metadata if isinstance(marker, Env)] if field is not None else []
    return found[0] if found else None
