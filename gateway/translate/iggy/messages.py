"""Iggy messages and consumer offsets <-> the canonical model (DESIGN.md §3, iggy.md §5.7, §6).

Pure functions used by both roles: the listener (through ``requests``) and the Iggy backend
(``gateway.backends.iggy``). A message's payload is the value, its user
headers the canonical headers (Iggy's typed kinds are the canonical kinds 1..15), its u128 id
the canonical id and its origin timestamp the canonical timestamp. A key (Kafka) travels as the
``streamgate.key`` header. Iggy stores the LAST consumed offset where the canonical store keeps
the NEXT one to read: ``stored = next - 1``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import Final

from gateway.model import (
    Header,
    HeaderKind,
    Message,
    WireBatch,
    WireFormat,
)
from gateway.translate.lossy import Lossy, ignore_lossy
from protocols import iggy as wire
from protocols.iggy.batch import decode_batch
from protocols.iggy.headers import Header as IggyHeader
from protocols.iggy.headers import HeaderKind as IggyKind
from protocols.iggy.headers import HeaderValue
from protocols.iggy.identifiers import Consumer, ConsumerKind, Identifier
from protocols.iggy.wire import Reader

U64_MAX: Final = (1 << 64) - 1
U32_MAX: Final = (1 << 32) - 1
KEY_HEADER: Final = "streamgate.key"  # where a Kafka key goes, Iggy messages have no key field
CONSUMER_PREFIX: Final = "iggy-consumer-"  # the canonical group of an Iggy single consumer
_MAX_HEADER_BYTES: Final = 255  # Iggy header keys and values are 1..255 bytes (§2)

# --- headers --------------------------------------------------------------------------------------

# Canonical kinds outside Iggy's 1..15 (AMQP types) and the Iggy kind that carries them.
_AMQP_KINDS: Final = {
    HeaderKind.TIMESTAMP: IggyKind.INT64,
    HeaderKind.UUID: IggyKind.UINT128,
    HeaderKind.SYMBOL: IggyKind.STRING,
}


def header_text(value: HeaderValue) -> str:
    if value.kind is IggyKind.STRING:
        return value.value.decode("utf-8", "replace")
    return value.value.decode("latin-1")


def canonical_headers(headers: tuple[IggyHeader, ...]) -> tuple[Header, ...]:
    return tuple(
        Header(header_text(h.key), h.value.value, HeaderKind(h.value.kind)) for h in headers
    )


def _iggy_header(h: Header, lossy: Lossy) -> IggyHeader | None:
    name = h.name.encode()
    if not 1 <= len(name) <= _MAX_HEADER_BYTES or not 1 <= len(h.value) <= _MAX_HEADER_BYTES:
        lossy("headers")
        return None
    kind = _AMQP_KINDS.get(h.kind, h.kind)
    try:
        value_kind = IggyKind(kind)
    except ValueError:
        lossy("headers")
        return None
    return IggyHeader(
        key=HeaderValue(kind=IggyKind.STRING, value=name),
        value=HeaderValue(kind=value_kind, value=h.value),
    )


# --- messages -------------------------------------------------------------------------------------


def to_canonical(
    messages: Sequence[wire.Message], *, key: bytes | None = None, assign_ids: bool = False
) -> list[Message]:
    """Sent messages -> canonical. ``key``: a MessagesKey partitioning value (server-resolved
    in the classic framing). ``assign_ids``: an id of 0 gets a random one, as the classic
    server did. The origin timestamp (0 = none) is the canonical timestamp."""
    out = []
    for m in messages:
        headers = canonical_headers(m.headers)
        message_id = m.id or (uuid.uuid4().int if assign_ids else 0)
        out.append(Message(m.payload, key, headers, m.origin_timestamp, -1, message_id))
    return out


def from_polled(messages: Iterable[wire.Message]) -> list[Message]:
    """Polled messages -> canonical, with their offsets. The inverse of ``to_iggy``: the
    ``streamgate.key`` header becomes the key again, and a message without an origin
    timestamp takes the server's append time."""
    out = []
    for m in messages:
        key = None
        headers = canonical_headers(m.headers)
        for i, h in enumerate(headers):
            if h.name == KEY_HEADER:
                key = h.value
                headers = headers[:i] + headers[i + 1 :]
                break
        timestamp = m.origin_timestamp or m.timestamp
        out.append(Message(m.payload, key, headers, timestamp, m.offset, m.id))
    return out


def decode_wire(stored: WireBatch) -> list[Message]:
    """A stored Iggy batch as canonical messages (for readers of other protocols)."""
    sent = decode_batch(Reader(stored.data), verify=False)
    base = stored.base_offset
    return [
        Message(
            m.payload, None, canonical_headers(m.headers), m.origin_timestamp, base + m.offset, m.id
        )
        for m in sent
    ]


# a producer's era C batch as sent (256-byte header + frames)
WIRE_FORMAT: Final = WireFormat(name="iggy", decode=decode_wire)


def to_iggy(
    messages: Iterable[Message], lossy: Lossy = ignore_lossy, *, append_timestamp: int | None = None
) -> list[wire.Message]:
    """Canonical -> polled messages. The canonical timestamp is the origin timestamp; the append
    timestamp, shared by one stored batch in Iggy, is ``append_timestamp`` (default: the
    message's own). A key (Kafka) travels as the ``streamgate.key`` header when it fits."""
    out = []
    for m in messages:
        headers = tuple(h for h in (_iggy_header(x, lossy) for x in m.headers) if h is not None)
        if m.key is not None:
            if 1 <= len(m.key) <= _MAX_HEADER_BYTES:
                headers += (
                    IggyHeader(key=HeaderValue.string(KEY_HEADER), value=HeaderValue.raw(m.key)),
                )
            else:
                lossy("key")
        out.append(
            wire.Message(
                id=m.id,
                payload=m.value,
                headers=headers,
                offset=m.offset,
                timestamp=m.timestamp_us if append_timestamp is None else append_timestamp,
                origin_timestamp=m.timestamp_us,
            )
        )
    return out


def message_bytes(message: Message) -> int:
    """What a message weighs for max/min bytes of a read (value, key and headers)."""
    size = len(message.value) + len(message.key or b"")
    return size + sum(len(h.name) + len(h.value) for h in message.headers)


# --- offsets --------------------------------------------------------------------------------------


def current_offset(next_offset: int) -> int:
    """§6.3: the partition's highest offset, 0 when empty."""
    return max(0, next_offset - 1)


def next_offset(current: int, messages_count: int) -> int:
    """The inverse of ``current_offset``, with the partition's message count to tell "empty"
    (0, 0) from "one message at 0" (0, 1). A partition purged right after its first message
    reads as empty too: the protocol does not say more."""
    return current + 1 if current or messages_count else 0


def consumer_group_name(consumer_id: int | str) -> str:
    """The canonical group of an Iggy single consumer. Consumer groups use their own name, so
    a Kafka group and an Iggy consumer group of the same name share committed offsets."""
    return f"{CONSUMER_PREFIX}{consumer_id}"


def consumer_of(group: str) -> Consumer:
    """The Iggy single consumer that keeps a canonical group's offsets: the inverse of
    ``consumer_group_name`` for ``iggy-consumer-<id>`` (a numeric id stays numeric, as the SDK
    sends decimal names, §2), and a consumer of the group's own name otherwise."""
    ident: Identifier = group
    if group.startswith(CONSUMER_PREFIX):
        rest = group[len(CONSUMER_PREFIX) :]
        if rest.isascii() and rest.isdigit() and int(rest) <= U32_MAX:
            ident = int(rest)
        elif rest:
            ident = rest
    return Consumer(kind=ConsumerKind.CONSUMER, id=ident)


def stored_offset(next_offset: int | None) -> int | None:
    """Canonical NEXT offset -> Iggy's last consumed one (None: nothing stored)."""
    return None if next_offset is None or next_offset <= 0 else next_offset - 1


__all__ = [
    "CONSUMER_PREFIX",
    "KEY_HEADER",
    "U32_MAX",
    "U64_MAX",
    "WIRE_FORMAT",
    "Lossy",
    "canonical_headers",
    "consumer_group_name",
    "consumer_of",
    "current_offset",
    "decode_wire",
    "from_polled",
    "header_text",
    "message_bytes",
    "next_offset",
    "stored_offset",
    "to_canonical",
    "to_iggy",
]
