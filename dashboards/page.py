"""Render the dashboard HTML from collected data (see `data.py`) with Jinja2.

Autoescaping is on for every template; the data travels as JSON inside a
`<script type="application/json">` element with `<`, `>` and `&` escaped, so no value can
close the element or open a tag. Why Plotly: it ships a complete, offline plotly.js
inside its PyPI package (no CDN, no network), draws interactive charts (hover, zoom,
legends) with no build step, and is widely used and maintained; the price is a larger
file (about 5 MB), which still opens from an email attachment.

Not responsible for gathering the numbers or serving pages.
"""

from __future__ import annotations

import json
from datetime import UTC, tzinfo
from functools import cache
from importlib import resources
from typing import Any

from jinja2 import Environment, FunctionLoader, select_autoescape

from llmtap.analytics.render import money, zone_label
from llmtap.dashboards import shown

# The page's own scripts, in order: formats and colours, the tables, the charts (which run).
SCRIPTS = ("vocabulary.js", "format.js", "exchanges.js", "dashboard.js")  # vocabulary.js: generated


def _template_source(name: str) -> str:
    return resources.files("llmtap.dashboards").joinpath(name).read_text(encoding="utf-8")


@cache
def environment() -> Environment:
    env = Environment(
        loader=FunctionLoader(_template_source),
        autoescape=select_autoescape(default=True, default_for_string=True),
    )
    # Values shown through `tojson` (times, money) print as their text.
    env.policies["json.dumps_kwargs"] = {"default": str, "ensure_ascii": False}
    # Money as the CLI shows it (`$1,234.56`; `unpriced` where there is no price).
    env.filters["money"] = lambda value: money(value, missing="unpriced")
    return env


@cache
def plotly_js() -> str:
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


def script_json(data: Any) -> str:
    """JSON that is safe inside a <script> element."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render(data: dict[str, Any], *, store: str, live: bool = False, refresh_seconds: int = 5) -> str:
    template = environment().get_template("base.html")
    window = data.get("window") or {}
    return template.render(
        title="LLM traffic",
        store=store,
        generated_at=data.get("generated_at", ""),
        period=window.get("text", ""),
        zone=window.get("zone", "UTC"),
        live=live,
        refresh_seconds=refresh_seconds,
        css=_template_source("dashboard.css"),
        dashboard_js="\n".join(_template_source(name) for name in SCRIPTS),
        plotly_js=plotly_js(),
        data_json=script_json(data),
        reconcile=(data.get("reconcile") or {}).get("results") or [],  # _reconcile.html
    )


def render_exchange(data: dict[str, Any], *, store: str, root: str = "../", zone: tzinfo = UTC) -> str:
    """One exchange in full (the served dashboard's page per exchange), as `show` prints
    it: the sections before the transcript, the transcript, the sections after it."""
    sections = shown.exchange(data, zone)
    split = next((i for i, s in enumerate(sections) if s.title == "Answer"), len(sections))
    return (
        environment()
        .get_template("exchange.html")
        .render(
            title=f"exchange {data['id']}",
            store=store,
            root=root,
            css=_template_source("dashboard.css"),
            x=data,
            head=sections[:split],
            tail=sections[split:],
            zone=zone_label(zone),
        )
    )


_TOLD = {"session": "client session", "chain": "response chain", "prefix": "same key, model and first message"}


def render_conversation(data: dict[str, Any], *, store: str, root: str = "../", zone: tzinfo = UTC) -> str:
    identity = data.get("identity") or {}
    told = "told by " + _TOLD.get(identity.get("rule") or "", "its first message")
    if identity.get("session_id"):
        told += f" {identity['session_id']}"
    return (
        environment()
        .get_template("conversation.html")
        .render(
            title=f"conversation of {data['exchange_id']}",
            store=store,
            root=root,
            css=_template_source("dashboard.css"),
            c=data,
            turns=shown.conversation_turns(data["turns"], zone),
            told=told,
            zone=zone_label(zone),
        )
    )
