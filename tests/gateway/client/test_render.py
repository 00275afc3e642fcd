"""How ``consume`` prints messages: values per line, or JSON with exact bytes and typed headers."""

from __future__ import annotations

import base64
import json
import struct
import uuid

from gateway.client.render import message_json, render
from gateway.model import Header, HeaderKind, Message


def test_value_format_is_the_values_one_per_line() -> None:
    messages = [Message(value=b"a", offset=0), Message(value=b"\xff", offset=1)]
    assert render("value", "t", 0, messages) == b"a\n\xff\n"


def test_json_keeps_every_field_and_the_exact_bytes() -> None:
    m = Message(value=b"\xff\x00", key=b"k", offset=7, timestamp_us=1_700_000_000_123_456,
                headers=(Header("h", b"1"), Header("bin", b"\x80"), Header("h", b"2")),
                id=2**100)  # fmt: skip
    got = json.loads(message_json("orders", 3, m))
    assert got == {
        "topic": "orders", "partition": 3, "offset": 7, "timestamp_us": 1_700_000_000_123_456,
        "key": "k", "value": None, "value_base64": base64.b64encode(b"\xff\x00").decode(),
        "headers": [{"name": "h", "value": "1"},
                    {"name": "bin", "value": None, "value_base64": "gA=="},
                    {"name": "h", "value": "2"}],
        "id": 2**100,
    }  # fmt: skip
    plain = json.loads(message_json("t", 0, Message(value=b"v", offset=0)))
    assert plain["key"] is None and "id" not in plain and "key_base64" not in plain


def test_typed_headers_print_as_their_values() -> None:
    u = uuid.uuid4()
    headers = (
        Header("s", "é".encode(), HeaderKind.STRING),
        Header("b", b"\x01", HeaderKind.BOOL),
        Header("i", (-5).to_bytes(4, "little", signed=True), HeaderKind.INT32),
        Header("u", (2**64 - 1).to_bytes(8, "little"), HeaderKind.UINT64),
        Header("f", struct.pack("<d", 1.5), HeaderKind.FLOAT64),
        Header("n", b"", HeaderKind.NULL),
        Header("id", u.bytes, HeaderKind.UUID),
        Header("odd", b"\x01\x02\x03", HeaderKind.FLOAT32),  # not 4 bytes: shown as bytes
    )
    got = json.loads(message_json("t", 0, Message(value=b"", headers=headers)))["headers"]
    assert [(h["name"], h["value"], h["kind"]) for h in got] == [
        ("s", "é", "string"), ("b", True, "bool"), ("i", -5, "int32"),
        ("u", 2**64 - 1, "uint64"), ("f", 1.5, "float64"), ("n", None, "null"),
        ("id", str(u), "uuid"), ("odd", "\x01\x02\x03", "float32"),
    ]  # fmt: skip
