"""Which team an exchange is billed to, and by which rule (SPEC §4).

First match wins: the proxy-auth user name (`proxy_auth`), the `X-LLMTap-Team` header
(`header`), the reverse listener's team (`listener`), the key-fingerprint map
(`key_map`: the destination's key first, then any other credential the request carries,
protocols/api_keys.py), for an import the team `llmtap import --team` names (`import`);
else `unattributed` (`none`). A team name is data from the client: control
characters never reach it, and a key-shaped name (a key pasted where a team belongs) is
scrubbed like a key, as is the exact key value the request carried.

Not responsible for reading the rules' inputs off a request (the addon and the importers
do) or for checking proxy credentials (`addon/auth.py`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from llmtap.storage.secrets import REDACTED, scrub

ATTRIBUTIONS = ("proxy_auth", "header", "listener", "key_map", "import", "none")
UNATTRIBUTED = "unattributed"
TEAM_CHARS = 200  # the `team` column's width


def clean_team(value: str | None, secrets: Iterable[str] = ()) -> str:
    """A team name as it may be stored: printable, no key in it, at most 200 characters."""
    # Control characters (a CR/LF smuggled into a header) become spaces.
    cleaned = "".join(c if c.isprintable() else " " for c in value or "").strip()
    for secret in secrets:
        if secret and secret in cleaned:
            cleaned = cleaned.replace(secret, REDACTED)
    # Scrubbed before it is cut, so no cut can leave part of a key unrecognised.
    return scrub(cleaned)[:TEAM_CHARS]


def attribute(
    *,
    proxy_user: str | None,
    team_header: str | None,
    listener_team: str | None,
    fingerprint: str | None,
    key_teams: Mapping[str, str],
    secrets: Iterable[str] = (),
    import_team: str | None = None,
    carried: Iterable[str] = (),
) -> tuple[str, str]:
    """(team, attribution): the first rule that names a team, and its name. The key map
    looks up `fingerprint` (the key the destination reads) first, then the fingerprints of
    the other credentials the request `carried` (SPEC §4: an extra header changes nothing)."""
    keys = tuple(secrets)
    for candidate, rule in ((proxy_user, "proxy_auth"), (team_header, "header"), (listener_team, "listener")):
        cleaned = clean_team(candidate, keys)
        if cleaned:
            return cleaned, rule
    for candidate in (fingerprint, *carried):
        if candidate and candidate in key_teams:
            return clean_team(key_teams[candidate]) or UNATTRIBUTED, "key_map"
    named = clean_team(import_team, keys)
    if named:
        return named, "import"
    return UNATTRIBUTED, "none"
