"""Errors the storage layer reports to its callers as one-line messages, and the masking
of a database URL's password wherever a message may show one.

Not responsible for how a message is printed (the CLI's `main` does that).
"""

from __future__ import annotations

import re
from urllib.parse import unquote_plus


class StoreError(Exception):
    """The store cannot be used as asked (a bad URL, a database that cannot be reached)."""


# user:password@ in any URL of a message (the password runs to the last @ of its word),
# and a password given as a query parameter (psycopg takes `?password=`, libpq also
# `sslpassword`; the name may be percent-encoded, as SQLAlchemy decodes it).
_USERINFO = re.compile(r"(?P<head>\b[A-Za-z][\w+.-]*://[^:/@\s]*:)\S*@")
_QUERY = re.compile(r"(?P<head>[?&](?P<name>[^=&#\s'\"]*)=)[^&\s'\"]*")


def _query_password(match: re.Match[str]) -> str:
    return f"{match['head']}***" if "password" in unquote_plus(match["name"]).lower() else match[0]


def mask_passwords(text: str) -> str:
    """`text` with the password of every URL in it shown as `***`."""
    return _QUERY.sub(_query_password, _USERINFO.sub(r"\g<head>***@", text))


def shown_url(url: str) -> str:
    """A database URL as a message may show it: everything between `user:` and the last `@`
    masked, the way SQLAlchemy reads a password (which may hold spaces and slashes). Text
    that is no URL at all (`u:pw@host/db`, `postgresql:/u:pw@host`) has everything between
    its first `:` and its last `@` masked: nothing says where a password would end."""
    scheme, sep, rest = url.partition("://")
    userinfo, at, host = rest.rpartition("@")
    user, colon, _password = userinfo.partition(":")
    if sep and at and colon and "/" not in user:
        url = f"{scheme}://{user}:***@{host}"
    elif not sep:
        head, colon, tail = url.partition(":")
        _secret, at, host = tail.rpartition("@")
        if colon and at:
            url = f"{head}:***@{host}"
    return mask_passwords(url)
