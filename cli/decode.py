"""`llmtap decode`: decode one exchange from files and print its canonical JSON (SPEC §3).

A body that cannot be decoded still prints a record with `decode_error` (exit 0); a
missing file or a bad flag is a one-line error. `provider` is named as the proxy names
it (protocols/providers.py: genai-prices' provider list, the config's `[[providers]]`,
the route), from `--host` and `--path`. Not responsible for storing anything.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from llmtap.cli import settings as settings_module
from llmtap.cli.errors import UsageError
from llmtap.protocols import PROTOCOLS, decode_exchange, route
from llmtap.protocols.common import tier_word
from llmtap.protocols.exchange import SERVED_TIER_HEADER, SERVED_TIER_PROTOCOLS


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "decode",
        help="decode one recorded exchange and print the canonical JSON",
        description="Decode one exchange offline. The response file holds the body as it "
        "came off the wire: with --content-encoding gzip it is still compressed.",
    )
    parser.add_argument("--response", required=True, metavar="FILE", help="response body file")
    parser.add_argument("--path", required=True, help="request path, e.g. /v1/messages")
    parser.add_argument("--request", metavar="FILE", help="request body file (JSON)")
    parser.add_argument("--host", help="request host, e.g. api.anthropic.com")
    parser.add_argument("--status", type=_status, default=200, help="HTTP status (default 200)")
    parser.add_argument("--content-type", help="response Content-Type")
    parser.add_argument("--content-encoding", help="response Content-Encoding (gzip, br, zstd, deflate)")
    parser.add_argument("--protocol", choices=PROTOCOLS, help="override protocol detection")
    parser.add_argument("--config", metavar="FILE", help="TOML config file (env LLMTAP_CONFIG): its [[providers]]")
    parser.add_argument(
        "--served-tier",
        type=_tier,
        metavar="WORD",
        help=f"the response's {SERVED_TIER_HEADER} header (standard, flex, priority): the tier "
        "Gemini served, recorded ahead of what the body or the request says (Gemini paths only)",
    )
    parser.set_defaults(run=run)


def _status(value: str) -> int:
    try:
        status = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an HTTP status: {value!r}") from None
    if not 100 <= status <= 599:
        raise argparse.ArgumentTypeError(f"not an HTTP status: {value!r}")
    return status


def _tier(value: str) -> str:
    word = tier_word(value)
    if word is None:
        raise argparse.ArgumentTypeError(f"not a service tier: {value!r}")
    return word


def _read(path: str | None, what: str) -> bytes | None:
    if path is None:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {what} file {path!r}: {exc.strerror or exc}") from None


def run(args: argparse.Namespace) -> int:
    response = _read(args.response, "response")
    request = _read(args.request, "request")
    assert response is not None
    protocol = args.protocol or route("POST", args.path)
    if protocol is None:
        raise UsageError(f"{args.path!r} is not a path of a supported LLM API (see --protocol)")
    if args.served_tier is not None and protocol not in SERVED_TIER_PROTOCOLS:
        raise UsageError(f"--served-tier is Gemini's {SERVED_TIER_HEADER} header; {protocol} has no such header")
    providers = settings_module.load(args).provider_names()
    exchange = decode_exchange(
        protocol,
        response=response,
        request=request,
        path=args.path,
        host=args.host,
        status=args.status,
        content_type=args.content_type,
        content_encoding=args.content_encoding,
        served_tier=args.served_tier,
        provider=providers.name(protocol, args.host, args.path),
    )
    json.dump(exchange.to_dict(), sys.stdout, ensure_ascii=False, indent=2)
    sys.stdout.write("\n")
    return 0
