"""The error type commands raise for bad input (printed as one line, exit status 2), and
the one-line form every error message takes on stderr.

Not responsible for deciding what is an error (the commands are).
"""

from __future__ import annotations

from llmtap.storage.errors import mask_passwords


class UsageError(Exception):
    """Bad input from the user (a missing file, a bad flag value)."""


# A message may quote what the user typed or what a driver said: its control characters
# (a newline splitting the line, an ESC) are shown as \xNN, not acted on by the terminal.
_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0))}


def one_line(message: str) -> str:
    """`message` as one line of text with every URL's password masked: a driver's message
    runs over several lines (SQLAlchemy adds a background link), the first ones say it."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    return mask_passwords(" ".join(lines)).translate(_CONTROLS)
