"""Who may read the store's data through a server llmtap runs on this machine (SPEC §6):
the dashboard's `--serve` and the proxy's `/metrics` admit requests by the same rules.

- Only a request whose `Host` names the address the server really listens on: a web page
  that rebinds its own DNS name to 127.0.0.1 sends its own name and is refused (421).
- A token (in the URL once, then a cookie; or `Authorization: Bearer`, as Prometheus
  sends it) off loopback always, and on loopback too when the store is private to its
  user: another local user must not read through the server what the files keep from
  them. Made here when the caller gave none.

When a store is private (`store_is_private`):
- SQLite: unless every local user may read the database file already (it is readable by
  others, and so is the way to it: every folder above it searchable by others). llmtap
  makes its stores 0600, so a store it made is private; one an administrator opened to
  everyone on purpose is not. A store that is not there yet (made 0600 when opened), or
  in memory, is private.
- PostgreSQL (and any other server): always. Who may connect is the server's business
  (roles, passwords, pg_hba.conf) and cannot be read from here; the rows are behind
  credentials this user holds, so a server that answered without a token would hand them
  to every local user.

Not responsible for serving anything (dashboards/serve.py, telemetry/metrics_serve.py)
nor for making files private (private.py).
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import secrets
import socket
import stat
from dataclasses import dataclass
from http.cookies import CookieError, SimpleCookie
from pathlib import Path
from urllib.parse import parse_qs, quote

COOKIE = "llmtap_token"


def store_is_private(url: str) -> bool:
    """Whether another local user is kept from reading the store at `url` (see above)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except ArgumentError:
        return True
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        return True
    return not _readable_by_everyone(Path(parsed.database.removeprefix("file:").split("?", 1)[0]))


def _readable_by_everyone(path: Path) -> bool:
    try:
        path = path.expanduser().resolve()
        if not os.stat(path).st_mode & stat.S_IROTH:
            return False
        return all(os.stat(folder).st_mode & stat.S_IXOTH for folder in path.parents)
    except OSError:
        return False  # not there yet (it will be made 0600), or not ours to look at


@dataclass(frozen=True)
class Admission:
    """Who a server bound to one address answers: the `Host` values it takes, whether any
    IP literal is one of its names (off loopback), and the token it asks for (None: none)."""

    hosts: frozenset[str]
    port: int
    any_address: bool
    token: str | None

    def host_allowed(self, header: str | None) -> bool:
        """A `Host` of ours. A page whose DNS name was rebound to this address sends its own
        name: refused. Off loopback an IP literal is ours too (a rebinding page has a name,
        never a literal), and the token stands behind it."""
        if not header:
            return False
        value = header.strip().lower()
        if value in self.hosts:
            return True
        if not self.any_address:
            return False
        name, port = _split_host(value)
        if (port or 80) != self.port:
            return False
        try:
            ipaddress.ip_address(name.strip("[]"))
        except ValueError:
            return False
        return True

    def token_check(self, query: str, cookie: str | None, authorization: str | None) -> str | None:
        """None: refused. Else the Set-Cookie value to send ("" for none): a token that came
        in the URL (`query`) becomes a cookie, so a page's own fetches and links carry it;
        `cookie` and `authorization` are the request's headers of those names."""
        if self.token is None:
            return ""
        given = parse_qs(query).get("token", [""])[-1]
        if given and _same(given, self.token):
            return f"{COOKIE}={self.token}; Path=/; HttpOnly; SameSite=Strict"
        try:
            kept = SimpleCookie(cookie or "").get(COOKIE)
        except CookieError:
            kept = None
        if kept is not None and _same(kept.value, self.token):
            return ""
        bearer = authorization or ""
        if bearer[:7].lower() == "bearer " and _same(bearer[7:].strip(), self.token):
            return ""
        return None

    def url(self, bound: str, path: str = "/") -> str:
        """The address to open, with the token when one is needed."""
        name = bound
        if ipaddress.ip_address(bound).is_unspecified:
            name = socket.gethostname()
        elif ":" in name:
            name = f"[{name}]"
        return f"http://{name}:{self.port}{path}" + (f"?token={quote(self.token)}" if self.token else "")


def admission(bound: str, port: int, host: str, token: str | None, *, private: bool) -> Admission:
    """For a server bound to `bound`:`port` (asked for as `host`): the Host names of the
    address it really listens on, and a token off loopback or when `private` (the one
    given, else one made here)."""
    address = ipaddress.ip_address(bound)
    names = {"localhost", f"[{address}]" if address.version == 6 else str(address)}
    if not address.is_loopback:
        names |= {socket.gethostname().lower(), socket.getfqdn().lower(), host.lower()}
    with_port = {f"{name}:{port}" for name in names}
    needed = private or not address.is_loopback
    return Admission(
        hosts=frozenset(with_port | names if port == 80 else with_port),
        port=port,
        any_address=not address.is_loopback,
        token=token or (secrets.token_urlsafe(24) if needed else None),
    )


def is_ipv6(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).version == 6
    except ValueError:
        return False


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


def _split_host(value: str) -> tuple[str, int | None]:
    """`name[:port]` or `[v6][:port]` as (name, port); a port that is not a number is -1."""
    if value.startswith("["):
        name, _, rest = value.partition("]")
        name, port = name + "]", rest.removeprefix(":") if rest.startswith(":") else ""
    elif value.count(":") == 1:
        name, _, port = value.partition(":")
    else:
        name, port = value, ""
    if not port:
        return name, None
    return name, int(port) if port.isdigit() else -1
