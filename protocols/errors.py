"""The one exception type the translators raise, naming where in the payload it happened.

Not responsible for deciding what a failure means for the traffic: callers turn a
`DecodeError` into the record's `decode_error` and carry on.
"""


class DecodeError(Exception):
    """A payload could not be decoded; `where` names the place (a JSON path, an event)."""

    def __init__(self, message: str, where: str | None = None) -> None:
        self.message = message
        self.where = where
        super().__init__(f"{message} at `{where}`" if where else message)
