"""Errors the storage layer reports to its callers as one-line messages."""


class StoreError(Exception):
    """The store cannot be used as asked (a bad URL, a database that cannot be reached)."""
