"""The recorder for a plain mitmdump (`mitmdump -s …/llmtap/cli/mitmdump_script.py`): one
addon holding the same chain `llmtap proxy` runs (addon/chain.py: `[auth]`, the
recorder, the budget gate), made once mitmdump has configured the `llmtap_*` options the
recorder declares, from what the script's opener returns.

Not responsible for reading settings or opening the writer (the opener, the CLI's).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from mitmproxy import ctx

from llmtap.addon.attribution import Attribution
from llmtap.addon.chain import recording_addons
from llmtap.addon.recorder import Recorder
from llmtap.storage.sink import RecordSink


class Opened(Protocol):
    attribution: Attribution
    auth: Mapping[str, str]

    @property
    def writer(self) -> RecordSink: ...

    @property
    def gate(self) -> Any: ...

    def close(self) -> None: ...

    def say_left(self) -> None: ...


class Script:
    """Add as the script's only addon; `opener` makes everything from mitmproxy's options."""

    def __init__(self, opener: Callable[[Any], Opened]) -> None:
        self.opener = opener
        self.recorder = Recorder(open_from_options=self._open)
        self.addons: list[Any] = [self.recorder]
        self.opened: Opened | None = None

    def _open(self, options: Any) -> tuple[RecordSink, Attribution]:
        opened = self.opener(options)
        chain = recording_addons(self.recorder, opened.attribution, opened.auth, opened.gate)
        for addon in chain:
            if addon is not self.recorder:
                ctx.master.addons.register(addon)
        # a new list, not this one changed: mitmproxy is walking it to configure the recorder
        self.addons = [*chain, _Closing(opened)]
        self.opened = opened
        return opened.writer, opened.attribution


class _Closing:
    """Last in the chain: after the recorder has closed the writer, the rest goes."""

    def __init__(self, opened: Opened) -> None:
        self.opened = opened

    def done(self) -> None:
        self.opened.close()
        self.opened.say_left()  # what the run wrote, and what waits (the writer is closed by now)
