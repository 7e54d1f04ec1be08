"""The recorder and the addons that go with it, in their order: `[auth]` checks a request
before it is attributed (addon/auth.py); the budget gate asks about the team the recorder
found (addon/budget_gate.py), its WebSocket part before the recorder (a `response.create`
is admitted before the recorder starts its exchange), and the recorder tells it when a
record is handed to the writer (its reservation is then released). First of all, the
HTTP layers that let the recorder answer a failed upstream (addon/answering.py). `llmtap proxy` runs
this chain (addon/proxy.py), and so does a plain mitmdump with the script
(addon/script.py).

Not responsible for what any of them does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llmtap.addon.answering import UpstreamAnswers
from llmtap.addon.attribution import Attribution
from llmtap.addon.auth import TeamAuth
from llmtap.addon.budget_gate import BudgetGate
from llmtap.addon.recorder import Recorder


def recording_addons(recorder: Recorder, attribution: Attribution, auth: Mapping[str, str], gate: Any) -> list[Any]:
    """`auth`: `[auth]`'s team -> password (empty: no check); `gate`: the budget gate (None: none)."""
    before: list[Any] = [UpstreamAnswers(), *([TeamAuth(auth, attribution)] if auth else [])]
    if gate is None:
        return [*before, recorder]
    budget = BudgetGate(gate)
    recorder.on_handed = budget.handed
    return [*before, budget.websockets(recorder.websockets), recorder, budget]
