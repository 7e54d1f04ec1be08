"""Errors the storage layer reports to its callers as one-line messages, and the masking
of a database URL's password wherever a message may show one.

Not responsible for how a message is printed (the CLI's `main` does that).
"""

from __future__ import annotations

import re


class StoreError(Exception):
    """The store cannot be used as asked (a bad URL, a database that cannot be reached)."""


# user:password@ in any URL of a message (the password runs to the last @ of its word),
# and a password given as a query parameter (psycopg takes `?password=`).
_USERINFO = re.compile(r"(?P<head>\b[A-Za-z][\w+.-]*://[^:/@\s]*:)\S*@")
_QUERY = re.compile(r"(?P<head>[?&]password=)[^&\s'\"]*", re.IGNORECASE)


def mask_passwords(text: str) -> str:
    """`text` with the password of every URL in it shown as `***`."""
    return _QUERY.sub(r"\g<head>***", _USERINFO.sub(r"\g<head>***@", text))


def shown_url(url: str) -> str:
    """A database URL as a message may show it: everything between `user:` and the last `@`
    masked, the way SQLAlchemy reads a password (which may hold spaces and slashes)."""
    scheme, sep, rest = url.partition("://")
    userinfo, at, host = rest.rpartition("@")
    user, colon, _password = userinfo.partition(":")
    if sep and at and colon and "/" not in user:
        url = f"{scheme}://{user}:***@{host}"
    return mask_passwords(url)
