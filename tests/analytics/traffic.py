"""The known traffic the analytics tests report on, built from wire bodies (see `wire.py`).

Every exchange carries, beside its record, the canonical usage a careful reader works out
by hand from its wire numbers (`usage`: input includes cache reads and writes; output
includes reasoning), and the genai-prices provider it bills under, so the tests can
price it independently with `genai_prices.calc_price`.

Teams, one per concern, so each report's expected numbers can be added up by hand:
  search, support  usage and cost basics over all three providers (2026-11-02 and -03)
  cache            conversations that hit, and one that misses for each cause of SPEC §5
  agents           tool calls of every status and the conversation problems
  ops              finish reasons, errors, latency
  hostile names    teams and models made of SQL, HTML and terminal markup
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from llmtap.storage.record import Recorded
from tests.analytics import wire as w

SONNET = "claude-sonnet-4-5-20250929"
GPT4O = "gpt-4o-2024-08-06"
GPT5 = "gpt-5-2025-08-07"
PRO = "gemini-2.5-pro"
FLASH = "gemini-2.5-flash"

DAY1 = datetime(2026, 11, 2, tzinfo=UTC)
DAY2 = datetime(2026, 11, 3, tzinfo=UTC)

KEY_SEARCH_ANTHROPIC = "test-key-search-anthropic-AAAA"
KEY_SEARCH_OPENAI = "test-key-search-openai-BBBB"

SQL_NAME = "x'); DROP TABLE exchanges;--"
HTML_NAME = "<script>alert('llmtap')</script>"
# a terminal table must neither read it as markup nor pass the ESC on to the terminal
MARKUP_NAME = "[/bold] [red]rich markup[/red] \\ \x1b[2J"


@dataclass
class Known:
    name: str  # a handle for the tests
    rec: Recorded
    usage: dict[str, int] | None  # canonical, by hand; None when the payload has none
    provider_id: str | None = None  # genai-prices provider, when it has this model

    @property
    def id(self) -> str:
        return self.rec.id


def at(day: datetime, hh: int, mm: int = 0, ss: int = 0) -> datetime:
    return day + timedelta(hours=hh, minutes=mm, seconds=ss)


def u(inp: int, read: int = 0, write: int = 0, out: int = 0, reasoning: int | None = None) -> dict[str, int]:
    usage = {"input_tokens": inp, "cache_read_tokens": read, "cache_write_tokens": write, "output_tokens": out}
    if reasoning is not None:
        usage["reasoning_tokens"] = reasoning
    return usage


def build() -> list[Known]:
    return [*_search(), *_support(), *_cache(), *_agents(), *_ops(), *_hostile()]


# -- usage and cost basics ----------------------------------------------------------------------


def _search() -> list[Known]:
    team = "search"
    return [
        Known(
            "s1",
            w.record(
                w.ANTHROPIC,
                w.anthropic_request(
                    SONNET, [{"role": "user", "content": "s1: find the docs"}], system="Search.", cache=None
                ),
                w.anthropic_response(SONNET, w.anthropic_usage(1200, 0, 0, 300), msg_id="msg_s1"),
                at=at(DAY1, 9),
                team=team,
                key=KEY_SEARCH_ANTHROPIC,
            ),
            u(1200, out=300),
            "anthropic",
        ),
        Known(
            "s2",
            w.record(
                w.RESPONSES,
                w.responses_request("gpt-5", "s2: rank these"),
                w.responses_response(GPT5, "resp_s2", input_tokens=1000, cached=600, output=200, reasoning=128),
                at=at(DAY1, 10),
                team=team,
                key=KEY_SEARCH_OPENAI,
            ),
            u(1000, read=600, out=200, reasoning=128),
            "openai",
        ),
        # A Chat stream without stream_options.include_usage: no usage at all.
        Known(
            "s3",
            w.record(
                w.CHAT,
                w.chat_request("gpt-4o", "s3: summarize", stream=True),
                w.chat_stream_without_usage(GPT4O, "chatcmpl-s3", ["Short", " summary."]),
                at=at(DAY1, 11),
                team=team,
                key=KEY_SEARCH_OPENAI,
            ),
            None,
            "openai",
        ),
        # A one-hour cache write (Anthropic bills it at 2x input, not 1.25x).
        Known(
            "s4",
            w.record(
                w.ANTHROPIC,
                w.anthropic_request(
                    SONNET, [{"role": "user", "content": "s4: long doc"}], system="Search." * 900, cache="1h"
                ),
                w.anthropic_response(SONNET, w.anthropic_usage(100, 5000, 0, 50, write_1h=True), msg_id="msg_s4"),
                at=at(DAY2, 9),
                team=team,
                key=KEY_SEARCH_ANTHROPIC,
            ),
            u(5100, write=5000, out=50),
            "anthropic",
        ),
    ]


def _support() -> list[Known]:
    team = "support"
    return [
        Known(
            "p1",
            w.record(
                w.CHAT,
                w.chat_request("gpt-4o", "p1: refund policy?"),
                w.chat_response(GPT4O, w.chat_usage(2000, 150, cached=1024), cid="chatcmpl-p1"),
                at=at(DAY1, 9, 30),
                team=team,
            ),
            u(2000, read=1024, out=150, reasoning=0),
            "openai",
        ),
        Known(
            "p2",
            w.record(
                w.gemini(PRO),
                w.gemini_request("p2: explain the contract"),
                w.gemini_response(PRO, prompt=12000, cached=8000, candidates=300, thoughts=1200),
                at=at(DAY2, 12),
                team=team,
            ),
            u(12000, read=8000, out=1500, reasoning=1200),
            "google",
        ),
        # Past 200k input tokens Gemini 2.5 Pro bills the higher tier.
        Known(
            "p3",
            w.record(
                w.gemini(PRO),
                w.gemini_request("p3: the whole archive"),
                w.gemini_response(PRO, prompt=250000, candidates=1000),
                at=at(DAY2, 13),
                team=team,
            ),
            u(250000, out=1000),
            "google",
        ),
        # A self-hosted OpenAI-compatible server: a model no price table knows.
        Known(
            "p4",
            w.record(
                ("openai.chat", "llm.internal.example", "/v1/chat/completions"),
                w.chat_request("acme-llm-7", "p4: hello"),
                w.chat_response("acme-llm-7", w.chat_usage(500, 100), cid="chatcmpl-p4"),
                at=at(DAY1, 9, 40),
                team=team,
            ),
            u(500, out=100, reasoning=0),
            None,
        ),
        # A fine-tune genai-prices does not know; the local price file adds it.
        Known(
            "p5",
            w.record(
                w.CHAT,
                w.chat_request("my-finetune-x", "p5: classify"),
                w.chat_response("my-finetune-x", w.chat_usage(1000, 100), cid="chatcmpl-p5"),
                at=at(DAY1, 9, 50),
                team=team,
            ),
            u(1000, out=100, reasoning=0),
            None,
        ),
    ]


# -- prompt caching -----------------------------------------------------------------------------

SYSTEM = "You are the cache-test assistant. " * 40
SYSTEM_EDITED = "You are the edited cache-test assistant. " * 40


def _conversation(
    name: str,
    start: datetime,
    turns: list[dict[str, Any]],
    *,
    team: str = "cache",
    model: str = SONNET,
) -> list[Known]:
    """Anthropic turns of one conversation. Each turn: `gap` (seconds after the previous
    turn started), `usage` (fresh, write, read, out), and optionally `tools`, `system`,
    `edit` (replace the assistant's first reply), `cache` (breakpoint TTL or None)."""
    out: list[Known] = []
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"{name}: first question"}]
    moment = start
    for index, turn in enumerate(turns):
        moment = moment + timedelta(seconds=turn.get("gap", 0))
        if index:
            messages = [
                *messages,
                {"role": "assistant", "content": f"{name}: answer {index}"},
                {"role": "user", "content": f"{name}: follow-up {index}"},
            ]
        sent = [dict(m) for m in messages]
        if turn.get("edit"):
            sent[1] = {"role": "assistant", "content": f"{name}: an answer someone rewrote"}
        fresh, write, read, outp = turn["usage"]
        request = w.anthropic_request(
            model,
            sent,
            system=turn.get("system", SYSTEM),
            tools=turn.get("tools", [w.WEATHER]),
            cache=turn.get("cache", "5m"),
        )
        response = w.anthropic_response(
            model,
            w.anthropic_usage(fresh, write, read, outp, write_1h=turn.get("cache") == "1h"),
            msg_id=f"msg_{name}_{index}",
        )
        out.append(
            Known(
                f"{name}/{index}",
                w.record(w.ANTHROPIC, request, response, at=moment, team=team, duration_ms=2000.0),
                u(fresh + write + read, read=read, write=write, out=outp),
                "anthropic" if model == SONNET else None,
            )
        )
    return out


def _cache() -> list[Known]:
    return [
        # Hits: each turn reads what the one before wrote.
        *_conversation(
            "hit",
            at(DAY1, 14),
            [
                {"usage": (20, 3000, 0, 100)},
                {"gap": 60, "usage": (30, 150, 3000, 80)},
                {"gap": 60, "usage": (25, 120, 3150, 60)},
            ],
        ),
        *_conversation(
            "tools",
            at(DAY1, 14, 10),
            [{"usage": (20, 3000, 0, 100)}, {"gap": 60, "tools": [w.WEATHER, w.SEARCH], "usage": (20, 3200, 0, 80)}],
        ),
        *_conversation(
            "system",
            at(DAY1, 14, 20),
            [{"usage": (20, 3000, 0, 100)}, {"gap": 60, "system": SYSTEM_EDITED, "usage": (20, 3100, 0, 80)}],
        ),
        *_conversation(
            "edit",
            at(DAY1, 14, 30),
            [
                {"usage": (20, 3000, 0, 100)},
                {"gap": 30, "usage": (20, 100, 3000, 50)},
                {"gap": 30, "edit": True, "usage": (20, 3300, 0, 80)},
            ],
        ),
        # 7 minutes after the previous turn ended (2 s after it started): past 5 minutes.
        *_conversation(
            "ttl", at(DAY1, 14, 40), [{"usage": (20, 3000, 0, 100)}, {"gap": 7 * 60, "usage": (20, 3150, 0, 80)}]
        ),
        # A one-hour breakpoint: 10 minutes later the cache is still there.
        *_conversation(
            "hour",
            at(DAY1, 15),
            [{"cache": "1h", "usage": (20, 3000, 0, 100)}, {"gap": 600, "cache": "1h", "usage": (30, 150, 3000, 80)}],
        ),
        # One hour TTL, 10 minutes, and a miss: not the TTL's fault but the prefix is too short.
        *_conversation(
            "hour-small",
            at(DAY1, 15, 20),
            [{"cache": "1h", "usage": (800, 0, 0, 50)}, {"gap": 600, "cache": "1h", "usage": (900, 0, 0, 40)}],
        ),
        *_conversation(
            "nobp",
            at(DAY1, 15, 40),
            [{"cache": None, "usage": (3020, 0, 0, 100)}, {"gap": 60, "cache": None, "usage": (3200, 0, 0, 80)}],
        ),
        *_conversation("small", at(DAY1, 15, 50), [{"usage": (700, 0, 0, 50)}, {"gap": 60, "usage": (780, 0, 0, 40)}]),
        # OpenAI caches by itself: the second turn reads most of the first.
        Known(
            "oai/0",
            w.record(
                w.CHAT,
                w.chat_request("gpt-4o", "oai: plan the trip"),
                w.chat_response(GPT4O, w.chat_usage(2000, 100), cid="chatcmpl-oai0"),
                at=at(DAY1, 16),
                team="cache",
            ),
            u(2000, out=100, reasoning=0),
            "openai",
        ),
        Known(
            "oai/1",
            w.record(
                w.CHAT,
                w.chat_request(
                    "gpt-4o",
                    "oai: plan the trip",
                    history=[{"role": "assistant", "content": "Day 1: …"}, {"role": "user", "content": "and day 2?"}],
                ),
                w.chat_response(GPT4O, w.chat_usage(2200, 90, cached=1920), cid="chatcmpl-oai1"),
                at=at(DAY1, 16, 1),
                team="cache",
            ),
            u(2200, read=1920, out=90, reasoning=0),
            "openai",
        ),
    ]


# -- tool calls ---------------------------------------------------------------------------------


def _tool_exchange(
    name: str, moment: datetime, tool_uses: list[tuple[str, str, Any]], *, tools: list[dict[str, Any]] | None = None
) -> Known:
    request = w.anthropic_request(
        SONNET,
        [{"role": "user", "content": f"{name}: do it"}],
        system="Agent.",
        tools=tools or [w.WEATHER, w.SEARCH],
        cache=None,
    )
    response = w.anthropic_response(
        SONNET, w.anthropic_usage(400, 0, 0, 60), text="", tool_uses=tool_uses, msg_id=f"msg_{name}"
    )
    return Known(name, w.record(w.ANTHROPIC, request, response, at=moment, team="agents"), u(400, out=60), "anthropic")


def _agents() -> list[Known]:
    team = "agents"
    chat_tools = [w.WEATHER, w.SEARCH]
    out = [
        _tool_exchange(
            "t1",
            at(DAY1, 17),
            [("toolu_t1a", "get_weather", {"city": "Paris"}), ("toolu_t1b", "search_docs", {"query": 7})],
        ),
        _tool_exchange("t2", at(DAY1, 17, 1), [("toolu_t2", "launch_rockets", {"count": 3})]),
        Known(
            "t3",
            w.record(
                w.CHAT,
                w.chat_request("gpt-4o", "t3: weather in Paris", tools=chat_tools),
                w.chat_response(
                    GPT4O,
                    w.chat_usage(300, 20),
                    text=None,
                    finish="tool_calls",
                    cid="chatcmpl-t3",
                    tool_calls=[("call_t3", "get_weather", '{"city": "Par')],
                ),
                at=at(DAY1, 17, 2),
                team=team,
            ),
            u(300, out=20, reasoning=0),
            "openai",
        ),
        # The output hit max_tokens inside the call's arguments.
        Known(
            "t4",
            w.record(
                w.CHAT,
                w.chat_request("gpt-4o", "t4: search the docs", tools=chat_tools),
                w.chat_response(
                    GPT4O,
                    w.chat_usage(300, 16),
                    text=None,
                    finish="length",
                    cid="chatcmpl-t4",
                    tool_calls=[("call_t4", "search_docs", '{"query": "how to')],
                ),
                at=at(DAY1, 17, 3),
                team=team,
            ),
            u(300, out=16, reasoning=0),
            "openai",
        ),
        _tool_exchange("t5", at(DAY1, 17, 4), [("toolu_t5", "get_weather", {})]),
        # The request body was not captured: no tool list, no conversation, still a bad call.
        Known(
            "t6",
            w.record(
                w.CHAT,
                None,
                w.chat_response(
                    GPT4O,
                    w.chat_usage(300, 20),
                    text=None,
                    finish="tool_calls",
                    cid="chatcmpl-t6",
                    tool_calls=[("call_t6", "get_weather", "city=Paris")],
                ),
                at=at(DAY1, 17, 5),
                team=team,
            ),
            u(300, out=20, reasoning=0),
            "openai",
        ),
    ]
    # A conversation: turn 0 calls A and B; turn 1 answers A only (B's result is
    # missing), carries a result for an id no one made (orphan), and calls A again (a
    # duplicate id); turn 2 answers that A.
    u0 = {"role": "user", "content": "cv: weather in Oslo and Rome?"}
    a1 = {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "toolu_A", "name": "get_weather", "input": {"city": "Oslo"}},
            {"type": "tool_use", "id": "toolu_B", "name": "get_weather", "input": {"city": "Rome"}},
        ],
    }
    u2 = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_A", "content": "3°C"},
            {"type": "tool_result", "tool_use_id": "toolu_ghost", "content": "?"},
        ],
    }
    a3 = {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "toolu_A", "name": "get_weather", "input": {"city": "Oslo"}}],
    }
    u4 = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_A", "content": "4°C"}]}
    turns = [
        (
            [u0],
            [("toolu_A", "get_weather", {"city": "Oslo"}), ("toolu_B", "get_weather", {"city": "Rome"})],
            (20, 3000, 0, 50),
        ),
        ([u0, a1, u2], [("toolu_A", "get_weather", {"city": "Oslo"})], (30, 100, 3000, 40)),
        ([u0, a1, u2, a3, u4], [], (30, 100, 3100, 20)),
    ]
    for index, (messages, calls, (fresh, write, read, outp)) in enumerate(turns):
        request = w.anthropic_request(SONNET, messages, system=SYSTEM, tools=[w.WEATHER])
        response = w.anthropic_response(
            SONNET,
            w.anthropic_usage(fresh, write, read, outp),
            text="" if calls else "Oslo 4°C.",
            tool_uses=calls,
            msg_id=f"msg_cv{index}",
        )
        out.append(
            Known(
                f"cv/{index}",
                w.record(w.ANTHROPIC, request, response, at=at(DAY1, 18, 0, 30 * index), team=team),
                u(fresh + write + read, read=read, write=write, out=outp),
                "anthropic",
            )
        )
    return out


# -- finish, errors, latency ------------------------------------------------------------------

LATENCY = [  # (ttfb, ttft, total) in ms, for the five gemini-2.5-flash calls
    (50, 100, 1000),
    (60, 200, 2000),
    (70, 300, 3000),
    (80, 400, 4000),
    (90, 500, 10000),
]


def _ops() -> list[Known]:
    team = "ops"

    def anth(name: str, moment: datetime, stop: str) -> Known:
        request = w.anthropic_request(SONNET, [{"role": "user", "content": f"{name}: go"}], cache=None)
        response = w.anthropic_response(
            SONNET, w.anthropic_usage(100, 0, 0, 10), stop_reason=stop, msg_id=f"msg_{name}"
        )
        return Known(name, w.record(w.ANTHROPIC, request, response, at=moment, team=team), u(100, out=10), "anthropic")

    def failed(
        name: str,
        where: tuple[str, str, str],
        request: dict[str, Any],
        body: dict[str, Any],
        status: int,
        moment: datetime,
        headers: dict[str, str] | None = None,
    ) -> Known:
        return Known(
            name,
            w.record(where, request, body, at=moment, team=team, status=status, headers=headers, ttft_ms=None),
            None,
        )

    req = w.anthropic_request(SONNET, [{"role": "user", "content": "ops: errors"}], cache=None)
    out = [
        Known(
            f"lat{i}",
            w.record(
                w.gemini(FLASH),
                w.gemini_request(f"lat{i}: quick"),
                w.gemini_response(FLASH, prompt=100, candidates=20),
                at=at(DAY1, 19, i),
                team=team,
                ttfb_ms=ttfb,
                ttft_ms=ttft,
                duration_ms=total,
            ),
            u(100, out=20),
            "google",
        )
        for i, (ttfb, ttft, total) in enumerate(LATENCY)
    ]
    out += [
        anth("o1", at(DAY1, 20, 1), "max_tokens"),
        anth("o2", at(DAY1, 20, 2), "stop_sequence"),
        anth("o3", at(DAY1, 20, 3), "refusal"),
        Known(
            "o4",
            w.record(
                w.CHAT,
                w.chat_request("gpt-4o", "o4: something unsafe"),
                w.chat_response(GPT4O, w.chat_usage(50, 0), text=None, finish="content_filter", cid="chatcmpl-o4"),
                at=at(DAY1, 20, 4),
                team=team,
            ),
            u(50, out=0, reasoning=0),
            "openai",
        ),
        failed(
            "o5",
            w.ANTHROPIC,
            req,
            w.anthropic_error("rate_limit_error", "Number of request tokens has exceeded"),
            429,
            at(DAY1, 20, 5),
            {"retry-after": "30"},
        ),
        failed("o6", w.ANTHROPIC, req, w.anthropic_error("api_error", "Internal server error"), 500, at(DAY1, 20, 6)),
        failed("o7", w.ANTHROPIC, req, w.anthropic_error("overloaded_error", "Overloaded"), 529, at(DAY1, 20, 7)),
        # An error event in the middle of a 200 stream.
        Known(
            "o8",
            w.record(
                w.ANTHROPIC,
                w.anthropic_request(SONNET, [{"role": "user", "content": "o8: go"}], cache=None, stream=True),
                w.anthropic_stream(SONNET, "msg_o8", w.anthropic_usage(100, 0, 0, 1), ["Hel", "lo"], "error"),
                at=at(DAY1, 20, 8),
                team=team,
            ),
            u(100, out=1),
            "anthropic",
        ),
        failed(
            "o9",
            w.CHAT,
            w.chat_request("gpt-4o", "o9: again"),
            w.openai_error("Rate limit reached for gpt-4o", "requests", "rate_limit_exceeded"),
            429,
            at(DAY1, 20, 9),
            {"retry-after-ms": "1500"},
        ),
        failed(
            "o10",
            w.gemini(PRO),
            w.gemini_request("o10: busy?"),
            w.gemini_error(503, "UNAVAILABLE", "The model is overloaded. Please try again later."),
            503,
            at(DAY1, 20, 10),
        ),
        # The client hung up mid-stream: no finish reason, usage only partial.
        Known(
            "o11",
            w.record(
                w.ANTHROPIC,
                w.anthropic_request(SONNET, [{"role": "user", "content": "o11: go"}], cache=None, stream=True),
                w.anthropic_stream(SONNET, "msg_o11", w.anthropic_usage(100, 0, 0, 1), ["Once upon"], "cut"),
                at=at(DAY1, 20, 11),
                team=team,
                interrupted="client disconnected",
            ),
            u(100, out=1),
            "anthropic",
        ),
    ]
    return out


# -- hostile names ------------------------------------------------------------------------------


def _hostile() -> list[Known]:
    """A team named like an SQL injection, models named like HTML; a two-turn conversation
    without cache_control, so they show up in `cache --list` too."""
    out = []
    for index, fresh in enumerate((1500, 1600)):
        messages = [{"role": "user", "content": "hostile: hi"}]
        if index:
            messages += [{"role": "assistant", "content": "hello"}, {"role": "user", "content": "again"}]
        request = w.anthropic_request(HTML_NAME, messages, cache=None)
        response = w.anthropic_response(HTML_NAME, w.anthropic_usage(fresh, 0, 0, 10), msg_id=f"msg_h{index}")
        out.append(
            Known(
                f"h/{index}",
                w.record(w.ANTHROPIC, request, response, at=at(DAY1, 21, index), team=SQL_NAME),
                u(fresh, out=10),
                None,
            )
        )
    request = w.anthropic_request(SQL_NAME, [{"role": "user", "content": "hostile: model"}], cache=None)
    response = w.anthropic_response(SQL_NAME, w.anthropic_usage(100, 0, 0, 10), msg_id="msg_h2")
    out.append(
        Known(
            "h/model",
            w.record(w.ANTHROPIC, request, response, at=at(DAY1, 21, 5), team=HTML_NAME),
            u(100, out=10),
            None,
        )
    )
    request = w.anthropic_request(MARKUP_NAME, [{"role": "user", "content": "hostile: markup"}], cache=None)
    response = w.anthropic_response(MARKUP_NAME, w.anthropic_usage(100, 0, 0, 10), msg_id="msg_h3")
    out.append(
        Known(
            "h/markup",
            w.record(w.ANTHROPIC, request, response, at=at(DAY1, 21, 6), team=MARKUP_NAME),
            u(100, out=10),
            None,
        )
    )
    return out
