"""The AWS event-stream framing that Bedrock's invoke-with-response-stream answers with,
written here from the format's description: each message is a 12-byte prelude (total
length, headers length, CRC32 of those 8 bytes), the headers, the payload, and a CRC32 of
everything before it. Every header here is a string (type 7). A `chunk` event's payload
is `{"bytes": base64 of one Anthropic stream event}`.

Not responsible for decoding (that is the product's; this side only writes).
"""

from __future__ import annotations

import base64
import json
import struct
import zlib
from typing import Any

STRING = 7


def headers_bytes(headers: dict[str, str]) -> bytes:
    out = b""
    for name, value in headers.items():
        raw_name, raw_value = name.encode(), value.encode()
        out += struct.pack("!B", len(raw_name)) + raw_name + struct.pack("!BH", STRING, len(raw_value)) + raw_value
    return out


def message(headers: dict[str, str], payload: bytes) -> bytes:
    head = headers_bytes(headers)
    total = 12 + len(head) + len(payload) + 4
    prelude = struct.pack("!II", total, len(head))
    prelude += struct.pack("!I", zlib.crc32(prelude))
    body = prelude + head + payload
    return body + struct.pack("!I", zlib.crc32(body))


def chunk(event: dict[str, Any]) -> bytes:
    """One Bedrock `chunk` event carrying one Anthropic stream event."""
    data = base64.b64encode(json.dumps(event).encode()).decode()
    payload = json.dumps({"bytes": data, "p": "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0"}).encode()
    headers = {":event-type": "chunk", ":content-type": "application/json", ":message-type": "event"}
    return message(headers, payload)


def parse(data: bytes) -> list[tuple[dict[str, str], bytes]]:
    """The messages of an event-stream body, CRCs checked: the encoder's own test."""
    out, pos = [], 0
    while pos < len(data):
        total, head_len, prelude_crc = struct.unpack("!III", data[pos : pos + 12])
        assert zlib.crc32(data[pos : pos + 8]) == prelude_crc, "prelude CRC"
        (crc,) = struct.unpack("!I", data[pos + total - 4 : pos + total])
        assert zlib.crc32(data[pos : pos + total - 4]) == crc, "message CRC"
        headers, at, end = {}, pos + 12, pos + 12 + head_len
        while at < end:
            name_len = data[at]
            name = data[at + 1 : at + 1 + name_len].decode()
            kind, value_len = struct.unpack("!BH", data[at + 1 + name_len : at + 4 + name_len])
            assert kind == STRING
            headers[name] = data[at + 4 + name_len : at + 4 + name_len + value_len].decode()
            at += 4 + name_len + value_len
        out.append((headers, data[end : pos + total - 4]))
        pos += total
    return out
