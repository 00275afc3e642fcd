"""How ``consume`` prints a message: its value alone, or one JSON object per line.

JSON fields: ``topic``, ``partition``, ``offset``, ``timestamp_us`` (the canonical microseconds),
``key``, ``value``, ``headers`` (a list, in order, duplicates kept) and ``id`` when the message
has one (Iggy's u128). Bytes that are UTF-8 print as text; others as ``null`` plus a
``<field>_base64`` twin, so a script can always get the exact bytes back. Typed headers (Iggy's
kinds, AMQP types) print as their JSON value with a ``kind``.
"""

from __future__ import annotations

import base64
import json
import struct
import uuid
from typing import Any, Final

from gateway.model import Header, HeaderKind, Message

_SIGNED: Final = frozenset(
    (HeaderKind.INT8, HeaderKind.INT16, HeaderKind.INT32, HeaderKind.INT64, HeaderKind.INT128,
     HeaderKind.TIMESTAMP)
)  # fmt: skip
_UNSIGNED: Final = frozenset(
    (HeaderKind.UINT8, HeaderKind.UINT16, HeaderKind.UINT32, HeaderKind.UINT64,
     HeaderKind.UINT128)
)  # fmt: skip
_FLOATS: Final = {HeaderKind.FLOAT32: "<f", HeaderKind.FLOAT64: "<d"}


def _bytes_fields(name: str, data: bytes | None, into: dict[str, Any]) -> None:
    if data is None:
        into[name] = None
        return
    try:
        into[name] = data.decode("utf-8")
    except UnicodeDecodeError:
        into[name] = None
        into[f"{name}_base64"] = base64.b64encode(data).decode("ascii")


def _typed(h: Header) -> Any:
    """The JSON value of a typed header (values are little-endian as Iggy sends them,
    gateway.model.HeaderKind); ``...`` when its bytes do not fit its kind."""
    kind, raw = h.kind, h.value
    if kind in (HeaderKind.STRING, HeaderKind.SYMBOL):
        return raw.decode("utf-8", "replace")
    if kind is HeaderKind.NULL:
        return None
    if kind is HeaderKind.BOOL and len(raw) == 1:
        return raw != b"\x00"
    if kind in _SIGNED or kind in _UNSIGNED:
        return int.from_bytes(raw, "little", signed=kind in _SIGNED)
    if kind in _FLOATS and len(raw) == struct.calcsize(_FLOATS[kind]):
        return struct.unpack(_FLOATS[kind], raw)[0]
    if kind is HeaderKind.UUID and len(raw) == 16:
        return str(uuid.UUID(bytes=raw))
    return ...


def _header(h: Header) -> dict[str, Any]:
    out: dict[str, Any] = {"name": h.name}
    if h.kind is HeaderKind.RAW:
        _bytes_fields("value", h.value, out)
        return out
    value = _typed(h)
    if value is ...:
        _bytes_fields("value", h.value, out)
    else:
        out["value"] = value
    out["kind"] = h.kind.name.lower()
    return out


def message_json(topic: str, partition: int, m: Message) -> str:
    """One JSON line (without the newline) for ``m``."""
    out: dict[str, Any] = {
        "topic": topic,
        "partition": partition,
        "offset": m.offset,
        "timestamp_us": m.timestamp_us,
    }
    _bytes_fields("key", m.key, out)
    _bytes_fields("value", m.value, out)
    out["headers"] = [_header(h) for h in m.headers]
    if m.id:
        out["id"] = m.id
    return json.dumps(out, ensure_ascii=False, separators=(", ", ": "))


def render(fmt: str, topic: str, partition: int, messages: list[Message]) -> bytes:
    """What ``consume`` writes to stdout for ``messages`` of one partition, newline-ended."""
    if fmt == "value":
        return b"".join(m.value + b"\n" for m in messages)
    return "".join(message_json(topic, partition, m) + "\n" for m in messages).encode("utf-8")
