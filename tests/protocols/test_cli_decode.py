"""`llmtap decode` (SPEC §3): bad input is one line on stderr and a non-zero exit, never a
traceback; a body that cannot be decoded is still a record (with `decode_error`), exit 0.

Most cases call the entry point in-process; two run the installed console script for real
(in parallel: it takes seconds to start)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import llmtap

FIXTURES = Path(__file__).resolve().parent / "fixtures"
REFUSAL = FIXTURES / "anthropic_stream_refusal"


def run(argv: list[str]) -> tuple[int, str, str]:
    result = llmtap("decode", *argv)
    code, out, err = result.code, result.out, result.err
    return code, out, err


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    made = {
        "garbage": b"this is not JSON and not SSE {",
        "bad_utf8": b'{"id": "\xff\xfe"}',
        "empty": b"",
        "not_gzip": b"plain text labelled gzip",
        "request_not_json": b"{model: nope",
        "refusal_gz": gzip.compress((REFUSAL / "response.body").read_bytes()),
    }
    for name, data in made.items():
        (tmp_path / name).write_bytes(data)
    return {name: str(tmp_path / name) for name in made} | {"dir": str(tmp_path)}


BAD_INPUT = {
    "missing response file": (
        ["--response", "/nonexistent/body", "--path", "/v1/messages"],
        "cannot read response file",
    ),
    "missing request file": (
        ["--response", "{garbage}", "--request", "/nonexistent/req.json", "--path", "/v1/messages"],
        "cannot read request file",
    ),
    "a directory as response": (["--response", "{dir}", "--path", "/v1/messages"], "cannot read response file"),
    "status not a number": (
        ["--response", "{garbage}", "--path", "/v1/messages", "--status", "abc"],
        "not an HTTP status",
    ),
    "status out of range": (
        ["--response", "{garbage}", "--path", "/v1/messages", "--status", "999"],
        "not an HTTP status",
    ),
    "unknown flag": (["--response", "{garbage}", "--path", "/v1/messages", "--bogus"], "unrecognized arguments"),
    "missing --path": (["--response", "{garbage}"], "--path"),
    "not an LLM path": (["--response", "{garbage}", "--path", "/v1/models"], "not a path of a supported LLM API"),
    "unknown --protocol": (
        ["--response", "{garbage}", "--path", "/v1/messages", "--protocol", "nope"],
        "invalid choice",
    ),
}


@pytest.mark.parametrize(("argv", "says"), BAD_INPUT.values(), ids=BAD_INPUT.keys())
def test_bad_input_is_one_line_and_a_non_zero_exit(argv: list[str], says: str, files: dict[str, str]):
    code, out, err = run([arg.format(**files) for arg in argv])
    assert code != 0
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("llmtap: error: ")
    assert says in err


UNDECODABLE = {
    "garbage": (["--response", "{garbage}", "--path", "/v1/messages"], "invalid JSON"),
    "invalid UTF-8": (["--response", "{bad_utf8}", "--path", "/v1/chat/completions"], "UTF-8"),
    "empty body": (["--response", "{empty}", "--path", "/v1/responses"], "empty"),
    "not really gzip": (["--response", "{not_gzip}", "--path", "/v1/messages", "--content-encoding", "gzip"], "gzip"),
    "unknown coding": (
        ["--response", "{garbage}", "--path", "/v1/messages", "--content-encoding", "compress"],
        "content-encoding",
    ),
    "request not JSON": (
        ["--response", "{garbage}", "--request", "{request_not_json}", "--path", "/v1/messages"],
        "request",
    ),
}


@pytest.mark.parametrize(("argv", "says"), UNDECODABLE.values(), ids=UNDECODABLE.keys())
def test_undecodable_body_is_a_record_with_decode_error(argv: list[str], says: str, files: dict[str, str]):
    code, out, err = run([arg.format(**files) for arg in argv])
    assert code == 0
    assert err == ""
    record = json.loads(out)
    assert says in record["decode_error"]
    assert record["protocol"] in ("anthropic.messages", "openai.chat", "openai.responses")


def test_a_compressed_stream_decodes_like_the_fixture(files: dict[str, str]):
    case = json.loads((REFUSAL / "case.json").read_text())
    argv = [
        "--response", files["refusal_gz"],
        "--request", str(REFUSAL / "request.json"),
        "--path", case["path"],
        "--host", case["host"],
        "--content-type", case["content_type"],
        "--content-encoding", "gzip",
    ]  # fmt: skip
    code, out, _ = run(argv)
    record = json.loads(out)
    assert code == 0
    assert record["decode_error"] is None
    for key in ("model", "finish_reason", "finish_reason_raw", "text", "complete", "streamed"):
        assert record[key] == case["expect"][key], key
    assert record["request"]["max_tokens"] == 2048


def test_the_console_script_never_prints_a_traceback(files: dict[str, str]):
    script = Path(sys.executable).with_name("llmtap")
    runs = {
        "missing": [str(script), "decode", "--response", "/nonexistent/body", "--path", "/v1/messages"],
        "garbage": [str(script), "decode", "--response", files["garbage"], "--path", "/v1/messages"],
    }
    procs = {name: subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for name, cmd in runs.items()}
    done = {name: (proc.communicate(timeout=60), proc.returncode) for name, proc in procs.items()}

    (out, err), code = done["missing"]
    assert code != 0 and out == b""
    assert err.count(b"\n") == 1 and b"Traceback" not in err

    (out, err), code = done["garbage"]
    assert code == 0 and b"Traceback" not in err
    assert "invalid JSON" in json.loads(out)["decode_error"]
