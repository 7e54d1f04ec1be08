"""The error type commands raise for bad input: printed as one line, exit status 2."""


class UsageError(Exception):
    """Bad input from the user (a missing file, a bad flag value)."""
