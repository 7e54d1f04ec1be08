"""The translator contract, as types: what every protocol module and its fold provide.

A protocol module (`anthropic_messages`, `openai_chat`, …) is a `Translator`; its `Fold`
class makes `Fold`s. Neither inherits anything: mypy checks them structurally where
exchange.py registers the modules (`TRANSLATORS: Mapping[str, Translator]`).

A fold folds stream events into the provider's non-streamed body and hands `decode_body` a
`Folded`: that body, untouched in shape, and beside it the `FoldExtras` the fold learnt
that the body has no field for. Nothing of ours goes inside the provider's dict, so a JSON
response can never pass itself off as a fold's state.

Not responsible for the finish-reason overrides every protocol shares (an error is
`error`, a natural stop with tool calls is `tool_use`): exchange.py applies those once,
after `decode_body`. Nor for framing (SSE, JSON arrays, content codings) or routing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from llmtap.protocols.budget import ExchangeBudget
from llmtap.protocols.canonical import Exchange, FinishReason, RequestFacts, Usage

__all__ = ["NO_EXTRAS", "FinishReason", "Fold", "FoldExtras", "Folded", "Translator"]


@dataclass(frozen=True, slots=True)
class FoldExtras:
    """What a fold knows about a stream that the folded body has no field for."""

    # The exchange's kept-text budget cut some streamed text or tool arguments.
    truncated: bool = False
    # Tool-call arguments exactly as their deltas streamed them, by the call's position in
    # the folded body's list (Anthropic `content`, Interactions `steps`). The body's
    # object-valued field cannot hold what the model produced when it is not valid JSON.
    raw_arguments: Mapping[int, str] = field(default_factory=dict)
    # The exchange's budget, for a body that still holds pieces to assemble (Gemini
    # `partialArgs` in a JSON body): set by exchange.py, whatever the fold said.
    budget: ExchangeBudget | None = None
    # The request's path (query string too), for a wire whose reading depends on the route
    # (Gemini on a Vertex AI path may send enums as Vertex AI's numbers): set by exchange.py.
    path: str = ""


NO_EXTRAS = FoldExtras()


@dataclass(frozen=True, slots=True)
class Folded:
    """A fold's result: the provider's non-streamed body shape, and the extras beside it."""

    body: dict[str, Any]
    extras: FoldExtras = NO_EXTRAS


class Fold(Protocol):
    """Folds one response's stream events, in order, into a `Folded`."""

    # The protocol's terminal marker arrived (SPEC §2 `complete`).
    complete: bool
    # A visible token or a piece of a client tool call has been folded (time to first token).
    saw_token: bool

    def feed(self, event: Any, name: str = "") -> None:
        """One event: its parsed JSON (any value; never raises on odd ones) and SSE name."""

    def end_marker(self) -> None:
        """The stream's `data: [DONE]`."""

    def result(self) -> Folded:
        """The body the events so far add up to; may be called on a cut stream."""
        ...


# The name `Fold` inside `Translator` is its member; this one is the protocol above.
_FoldProtocol = Fold


class Translator(Protocol):
    """One protocol module (SPEC §1): request facts, usage, and the response's decoding."""

    @property
    def PROTOCOL(self) -> str:  # noqa: N802 - a module constant, as the modules spell it
        """The protocol id (`anthropic.messages`, …)."""
        ...

    @property
    def Fold(self) -> Callable[[ExchangeBudget], _FoldProtocol]:  # noqa: N802 - the module's class
        """Makes a fold sharing the exchange's budget (`budget.py`)."""
        ...

    def convert_usage(self, raw: Any) -> Usage | None:
        """The provider's usage object as canonical usage (SPEC §2); None without counts."""
        ...

    def decode_body(self, body: dict[str, Any], ex: Exchange, extras: FoldExtras = NO_EXTRAS) -> None:
        """Fill `ex` from a non-streamed body (or a fold's), with the fold's extras if any.
        Sets `finish_reason` from the protocol's table only: the shared overrides are not
        its business."""

    def requested_model(self, body: dict[str, Any], path: str) -> str | None:
        """The model the request names (its body, or for Gemini its path)."""
        ...

    def decode_request(self, body: dict[str, Any], path: str = "") -> RequestFacts:
        """What the request asked for (SPEC §2 `request`)."""
        ...

    def requested_tier(self, body: dict[str, Any]) -> str | None:
        """The service tier the request asked for, lower-case; None for none, or for one
        that lets the provider choose (`auto`). The exchange's `service_tier` falls back to
        it when the response does not say what it served (SPEC §2)."""
        ...
