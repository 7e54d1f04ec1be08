"""`[auth]` credentials checked (SPEC §4): whose team a `Proxy-Authorization: Basic …`
value proves, for the proxy (addon/auth.py, before a request goes anywhere) and for
`llmtap import` (the header a HAR or flow file captured), so both take the same rule.

A team is a Basic user name (no `:`) whose password matches; the password is compared in
constant time whatever the user name, and goes nowhere.

Not responsible for refusing requests (the addon), reading the config (the CLI), or
attribution itself (teams.py).
"""

from __future__ import annotations

import binascii
import hmac
from collections.abc import Mapping


def basic_credentials(value: str | None) -> tuple[str, str] | None:
    """(user, password) of a `Basic` credential, or None when it is not one."""
    scheme, _, token = (value or "").strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = binascii.a2b_base64(token.strip().encode("ascii")).decode("utf-8")
    except (binascii.Error, UnicodeError):
        return None
    user, colon, password = decoded.partition(":")
    return (user, password) if colon else None


class ProxyCredentials:
    """Each team's proxy password (`[auth]`: team -> password)."""

    __slots__ = ("_teams",)

    def __init__(self, teams: Mapping[str, str]) -> None:
        self._teams = {team: password.encode() for team, password in teams.items()}

    def __repr__(self) -> str:
        return f"ProxyCredentials({len(self._teams)} teams)"  # never a password

    def team(self, header: str | None) -> str | None:
        """The team whose credentials `header` carries, or None (no header, not Basic,
        an unknown user or a wrong password)."""
        found = basic_credentials(header)
        if found is None:
            return None
        user, password = found
        expected = self._teams.get(user)
        # compared in full whatever the user, so timing tells nothing about the names
        ok = hmac.compare_digest(password.encode(), expected if expected is not None else b"\0" + password.encode())
        return user if ok and expected is not None else None
