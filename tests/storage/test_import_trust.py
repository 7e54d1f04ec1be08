"""What `llmtap import` believes of a file (SPEC §3, §4), through the real command.

- Under `[auth]`, an entry gets a team only from captured proxy credentials that check
  against `[auth]` (a `Proxy-Authorization` the HAR kept), as the proxy would: the
  `X-LLMTap-Team` header names no one, a wrong password no one; `--team T` names the team
  of the entries no rule names (attribution `import`), the key map still applies.
- Without `[auth]`, what an entry says is taken as the proxy takes it, and `--team` names
  the rest.
- The trusted-host rule is the import's own, whatever the file says: a rejected file's
  line that claims a trusted destination for a host nobody knows stays unpriced
  (`unverified_host`).
"""

from __future__ import annotations

import base64
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select

from llmtap.storage import record_json, rejected, schema
from llmtap.storage.ingest import HttpExchange, to_record
from llmtap.storage.rows import RowSet, rows_for
from llmtap.storage.secrets import KeyFingerprinter
from tests.helpers import llmtap
from tests.storage.helpers import T0

pytestmark = pytest.mark.timeout(120)

PASSWORD = "pw-beta-" + "b" * 24
MODEL = "claude-opus-4-1-20250805"
MAPPED_KEY = "sk-ant-api03-MAPPEDKEY" + "m" * 40


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def _answer(n: int) -> dict[str, Any]:
    return {
        "id": f"msg_import_trust_{n}",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [{"type": "text", "text": f"answer {n}"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1000 + n, "output_tokens": 100},
    }


def _entry(n: int, headers: dict[str, str], host: str = "api.anthropic.com") -> dict[str, Any]:
    request = {"model": MODEL, "max_tokens": 64, "messages": [{"role": "user", "content": f"question {n}"}]}
    sent = {"content-type": "application/json", "x-api-key": f"sk-ant-api03-IMPORTTRUST{n:04d}" + "k" * 36} | headers
    return {
        "startedDateTime": (T0 + timedelta(seconds=n)).isoformat(),
        "time": 120,
        "request": {
            "method": "POST",
            "url": f"https://{host}/v1/messages",
            "headers": [{"name": k, "value": v} for k, v in sent.items()],
            "postData": {"mimeType": "application/json", "text": json.dumps(request)},
        },
        "response": {
            "status": 200,
            "headers": [{"name": "content-type", "value": "application/json"}],
            "content": {"mimeType": "application/json", "text": json.dumps(_answer(n))},
        },
    }


# what each entry carries, in order of its start
CARRIED = {
    "team header": {"X-LLMTap-Team": "beta"},
    "wrong password": {"Proxy-Authorization": _basic("beta", "not-the-password")},
    "right password": {"Proxy-Authorization": _basic("beta", PASSWORD)},
    "mapped key": {"x-api-key": MAPPED_KEY},
    "nothing": {},
}


def _har(tmp_path: Path) -> Path:
    path = tmp_path / "teams.har"
    entries = [_entry(n, headers) for n, headers in enumerate(CARRIED.values())]
    path.write_text(json.dumps({"log": {"version": "1.2", "entries": entries}}))
    return path


def _config(tmp_path: Path, *, auth: bool) -> Path:
    mapped = KeyFingerprinter.from_file(tmp_path / "home" / "fingerprint.secret").fingerprint(MAPPED_KEY)
    text = f'[teams]\n"{mapped}" = "mapped-team"\n'
    if auth:
        text += f'[auth]\nalpha = "pw-alpha-{"a" * 24}"\nbeta = "{PASSWORD}"\n'
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def _who(engine: Engine) -> dict[str, tuple[str, str]]:
    ex = schema.exchanges.c
    with engine.connect() as connection:
        found = connection.execute(select(ex.team, ex.attribution).order_by(ex.started_at)).all()
    return dict(zip(CARRIED, [tuple(row) for row in found], strict=True))


def _import(tmp_path: Path, db_url: str, *args: str) -> None:
    done = llmtap("import", *args, "--db", db_url, env={"LLMTAP_HOME": str(tmp_path / "home")}, process=True)
    assert done.code == 0, done.err
    assert "imported" in done.out


@pytest.mark.parametrize(
    ("auth", "team", "expected"),
    [
        pytest.param(
            True,
            None,
            {
                "team header": ("unattributed", "none"),  # the header rule is off under [auth]
                "wrong password": ("unattributed", "none"),
                "right password": ("beta", "proxy_auth"),
                "mapped key": ("mapped-team", "key_map"),
                "nothing": ("unattributed", "none"),
            },
            id="auth",
        ),
        pytest.param(
            True,
            "ops",
            {
                "team header": ("ops", "import"),
                "wrong password": ("ops", "import"),
                "right password": ("beta", "proxy_auth"),
                "mapped key": ("mapped-team", "key_map"),
                "nothing": ("ops", "import"),
            },
            id="auth-team",
        ),
        pytest.param(
            False,
            "ops",
            {
                "team header": ("beta", "header"),  # as the proxy without [auth] takes it
                "wrong password": ("beta", "proxy_auth"),  # no password to check it against
                "right password": ("beta", "proxy_auth"),
                "mapped key": ("mapped-team", "key_map"),
                "nothing": ("ops", "import"),
            },
            id="no-auth-team",
        ),
    ],
)
def test_teams_of_imported_entries(
    tmp_path: Path, db_url: str, engines: Any, auth: bool, team: str | None, expected: dict[str, tuple[str, str]]
) -> None:
    config = _config(tmp_path, auth=auth)
    _import(tmp_path, db_url, str(_har(tmp_path)), "--config", str(config), *(["--team", team] if team else []))
    assert _who(engines(db_url)) == expected
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p.name not in ("config.toml", "teams.har")]
    assert written  # the home the import used (its secret), a SQLite store (the other two are the inputs)
    for path in written:
        assert PASSWORD.encode() not in path.read_bytes(), f"the proxy password is in {path}"


def test_import_team_is_a_team_name(tmp_path: Path, db_url: str) -> None:
    done = llmtap("import", str(_har(tmp_path)), "--team", " ", "--db", db_url, process=True)
    assert done.code == 2 and len(done.err.strip().splitlines()) == 1, done.err
    assert "--team wants a team name" in done.err


def _forged_rejected_file(tmp_path: Path) -> Path:
    """Two lines of a rejected file someone wrote by hand: a record and refused rows, each
    for a host nobody knows, each claiming the destination may bill (no `price_reason`;
    the rows priced already, at a fortune)."""
    fingerprinter = KeyFingerprinter.from_file(tmp_path / "home" / "fingerprint.secret")
    lines = []
    for n in (7, 8):
        entry = _entry(n, {}, host="llm.example.net")
        http = HttpExchange(
            method="POST",
            host="llm.example.net",
            path="/v1/messages",
            request_headers=[(h["name"], h["value"]) for h in entry["request"]["headers"]],
            request_body=entry["request"]["postData"]["text"].encode(),
            status=200,
            response_headers=[("content-type", "application/json")],
            response_body=entry["response"]["content"]["text"].encode(),
            response_encoded=False,
            started_at=T0 + timedelta(seconds=n),
        )
        record = to_record(http, fingerprinter=fingerprinter)
        assert record is not None and record.price_reason == "unverified_host"
        record.exchange.provider = "anthropic"
        if n == 7:
            data = record_json.to_json(record) | {"price_reason": None}
            lines.append(json.dumps({rejected.MARK: 1, "error": "x", "record": data}).encode() + b"\n")
        else:
            rows = rows_for(record)
            rows.exchanges[0] |= {"price_reason": None, "price_status": "priced", "cost_total_pico": 10**18}
            lines.append(rejected.rows_line(RowSet(rows.exchanges, rows.tool_calls), "x"))
    path = tmp_path / "rejected.jsonl"
    path.write_bytes(b"".join(lines))
    return path


def test_a_forged_rejected_line_never_brings_its_own_trust(tmp_path: Path, db_url: str, engines: Any) -> None:
    _import(tmp_path, db_url, str(_forged_rejected_file(tmp_path)))
    ex = schema.exchanges.c
    with engines(db_url).connect() as connection:
        found = connection.execute(
            select(ex.host, ex.usage_input_tokens, ex.price_status, ex.price_reason, ex.cost_total_pico).order_by(
                ex.started_at
            )
        ).all()
    assert [tuple(row) for row in found] == [
        ("llm.example.net", 1007, "unpriced", "unverified_host", None),
        ("llm.example.net", 1008, "unpriced", "unverified_host", None),
    ]


def _responses_entry(n: int, method: str, url: str, body: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
    request: dict[str, Any] = {
        "method": method,
        "url": url,
        "headers": [{"name": k, "value": v} for k, v in ({"content-type": "application/json"} | headers).items()],
    }
    if method == "POST":
        create = {"model": "gpt-4o-mini", "input": "Write the report.", "background": True}
        request["postData"] = {"mimeType": "application/json", "text": json.dumps(create)}
    return {
        "startedDateTime": (T0 + timedelta(seconds=n)).isoformat(),
        "time": 50,
        "request": request,
        "response": {
            "status": 200,
            "headers": [{"name": "content-type", "value": "application/json"}],
            "content": {"mimeType": "application/json", "text": json.dumps(body)},
        },
    }


def _background(status: str, usage: dict[str, int] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"id": "resp_har_bg", "object": "response", "status": status, "background": True}
    body |= {"model": "gpt-4o-mini", "output": [], "usage": None}
    if usage is not None:
        body["usage"] = usage | {"total_tokens": usage["input_tokens"] + usage["output_tokens"]}
    return body


def test_imported_polls_continue_only_their_own_teams_work(tmp_path: Path, db_url: str, engines: Any) -> None:
    """A HAR under [auth]: beta's background work, a poll of it with another team's right
    credentials and made-up usage, beta's own poll at another host, then beta's real poll."""
    beta = {"Proxy-Authorization": _basic("beta", PASSWORD), "authorization": "Bearer sk-proj-BETA" + "b" * 40}
    alpha = {
        "Proxy-Authorization": _basic("alpha", "pw-alpha-" + "a" * 24),
        "authorization": "Bearer sk-proj-ALPHA" + "a" * 40,
    }
    here, elsewhere = "https://api.openai.com/v1/responses", "https://llm.example.net/v1/responses"
    forged, under, real = (
        {"input_tokens": 900_000_000, "output_tokens": 1},
        {"input_tokens": 1, "output_tokens": 1},
        {"input_tokens": 2048, "output_tokens": 512},
    )
    entries = [
        _responses_entry(0, "POST", here, _background("queued"), beta),
        _responses_entry(1, "GET", here + "/resp_har_bg", _background("completed", forged), alpha),
        _responses_entry(2, "POST", here + "/resp_har_bg/cancel", _background("cancelled"), alpha),
        _responses_entry(3, "GET", elsewhere + "/resp_har_bg", _background("completed", under), beta),
        _responses_entry(4, "GET", here + "/resp_har_bg", _background("completed", real), beta),
    ]
    har = tmp_path / "background.har"
    har.write_text(json.dumps({"log": {"version": "1.2", "entries": entries}}))
    _import(tmp_path, db_url, str(har), "--config", str(_config(tmp_path, auth=True)))
    ex = schema.exchanges.c
    with engines(db_url).connect() as connection:
        (row,) = connection.execute(select(ex.team, ex.background_state, ex.usage_input_tokens, ex.price_status)).all()
    assert tuple(row) == ("beta", "completed", 2048, "priced")
