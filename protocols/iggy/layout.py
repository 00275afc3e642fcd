"""Declarative byte layouts: most Iggy payloads are a flat run of fields, some present only in
some eras. A ``Layout`` lists them once, so each command's era differences sit in one place.

A kind is anything with ``encode(value, era) -> bytes`` and ``decode(reader, era) -> value``;
a ``Layout`` is itself a kind, so structures nest. Fields absent in an era take their
dataclass default on decode and are left out on encode.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Protocol

from protocols._wire import LocalProtocolError

from .codes import Era
from .headers import decode_headers, encode_headers
from .identifiers import (
    decode_consumer,
    decode_identifier,
    decode_partition,
    decode_partitioning,
    decode_polling_strategy,
    encode_consumer,
    encode_identifier,
    encode_partition,
    encode_partitioning,
    encode_polling_strategy,
)
from .wire import (
    Reader,
    malformed,
    pack_bytes32,
    pack_f32,
    pack_name,
    pack_str32,
    pack_u8,
    pack_u16,
    pack_u32,
    pack_u64,
    pack_u128,
)

__all__ = [
    "ALL_ERAS",
    "BYTES32",
    "BYTES_REST",
    "CONSUMER",
    "F32",
    "FLAG",
    "IDENT",
    "LEGACY",
    "NAME",
    "PARTITION",
    "PARTITIONING",
    "STR32",
    "STRATEGY",
    "TLV_REST",
    "TLV_SIZED",
    "U8",
    "U16",
    "U32",
    "U64",
    "U128",
    "VSR",
    "Details",
    "Field",
    "Kind",
    "Layout",
    "ListOf",
    "Maybe",
    "Primitive",
    "decode_body",
]

ALL_ERAS: Final = frozenset(Era)
LEGACY: Final = frozenset((Era.A, Era.B))
VSR: Final = frozenset((Era.C,))


class Kind(Protocol):
    def encode(self, value: Any, era: Era, /) -> bytes: ...

    def decode(self, reader: Reader, era: Era, /) -> Any: ...


@dataclass(frozen=True, slots=True)
class Primitive:
    """A kind whose bytes do not depend on the era, or that asks for it explicitly."""

    name: str
    pack: Callable[[Any, Era], bytes]
    read: Callable[[Reader, Era], Any]

    def encode(self, value: Any, era: Era, /) -> bytes:
        return self.pack(value, era)

    def decode(self, reader: Reader, era: Era, /) -> Any:
        return self.read(reader, era)


def _tlv_sized_read(reader: Reader, era: Era) -> Any:
    return decode_headers(reader.sub(reader.u32("options length"), "options"), era)


U8: Final = Primitive("u8", lambda v, _: pack_u8(v), lambda r, _: r.u8())
U16: Final = Primitive("u16", lambda v, _: pack_u16(v), lambda r, _: r.u16())
U32: Final = Primitive("u32", lambda v, _: pack_u32(v), lambda r, _: r.u32())
U64: Final = Primitive("u64", lambda v, _: pack_u64(v), lambda r, _: r.u64())
U128: Final = Primitive("u128", lambda v, _: pack_u128(v), lambda r, _: r.u128())
F32: Final = Primitive("f32", lambda v, _: pack_f32(v), lambda r, _: r.f32())
FLAG: Final = Primitive("flag", lambda v, _: pack_u8(int(v)), lambda r, _: r.flag("flag"))
NAME: Final = Primitive("name", lambda v, _: pack_name(v), lambda r, _: r.name())
STR32: Final = Primitive("str32", lambda v, _: pack_str32(v), lambda r, _: r.str32("string"))
BYTES32: Final = Primitive("bytes32", lambda v, _: pack_bytes32(v), lambda r, _: r.bytes32("bytes"))
BYTES_REST: Final = Primitive(
    "bytes_rest", lambda v, _: bytes(v), lambda r, _: r.take(r.remaining, "bytes")
)
IDENT: Final = Primitive(
    "identifier", lambda v, _: encode_identifier(v), lambda r, _: decode_identifier(r)
)
CONSUMER: Final = Primitive(
    "consumer", lambda v, _: encode_consumer(v), lambda r, _: decode_consumer(r)
)
PARTITIONING: Final = Primitive(
    "partitioning", lambda v, _: encode_partitioning(v), lambda r, _: decode_partitioning(r)
)
STRATEGY: Final = Primitive(
    "strategy", lambda v, _: encode_polling_strategy(v), lambda r, _: decode_polling_strategy(r)
)
# The partition of poll/offset requests: OptPartition, or a bare u32 in era A.
PARTITION: Final = Primitive("partition", encode_partition, decode_partition)
# Options up to the end of a request body (§5.3, §5.4).
TLV_REST: Final = Primitive(
    "tlv_rest", lambda v, e: encode_headers(v, e), lambda r, e: decode_headers(r, e)
)
# Options in a reply: ``[len u32][TLV]`` (Stream and Topic, §5.3/§5.4).
TLV_SIZED: Final = Primitive(
    "tlv_sized", lambda v, e: pack_bytes32(encode_headers(v, e), "options"), _tlv_sized_read
)


@dataclass(frozen=True, slots=True)
class Maybe:
    """``[present u8][value]``, 0 = None (UpdateUser, CreateUser's permissions).

    ``padding`` zero bytes follow an absent flag: the era C user reply writes None as a u32 0,
    i.e. the flag and three more zeros (``UserDetailsResponse``, see ``body_system``)."""

    kind: Kind
    padding: int = 0

    def encode(self, value: Any, era: Era, /) -> bytes:
        if value is None:
            return bytes(1 + self.padding)
        return b"\x01" + self.kind.encode(value, era)

    def decode(self, reader: Reader, era: Era, /) -> Any:
        if reader.flag("presence flag"):
            return self.kind.decode(reader, era)
        if any(reader.take(self.padding, "absent value padding")):
            malformed("non-zero padding after an absent value")
        return None


@dataclass(frozen=True, slots=True)
class ListOf:
    """A tuple of ``kind``: counted by a u8 or u32 in front, or running to the end."""

    kind: Kind
    count: str  # "u8", "u32" or "rest"

    def encode(self, value: Any, era: Era, /) -> bytes:
        items = b"".join(self.kind.encode(item, era) for item in value)
        if self.count == "u8":
            return pack_u8(len(value), "count") + items
        if self.count == "u32":
            return pack_u32(len(value), "count") + items
        return items

    def decode(self, reader: Reader, era: Era, /) -> Any:
        if self.count == "rest":
            items = []
            while not reader.at_end():
                items.append(self.kind.decode(reader, era))
            return tuple(items)
        count = reader.u8("count") if self.count == "u8" else reader.u32("count")
        if count > reader.remaining:  # every item takes at least a byte: refuse before looping
            malformed(f"a count of {count} with {reader.remaining} bytes left")
        return tuple(self.kind.decode(reader, era) for _ in range(count))


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    kind: Kind
    eras: frozenset[Era] = ALL_ERAS


class Layout:
    """The fields of ``cls`` in wire order; decodes to ``cls(**fields)``."""

    __slots__ = ("cls", "fields")

    def __init__(self, cls: type[Any], *fields: Field) -> None:
        self.cls = cls
        self.fields = fields

    def __repr__(self) -> str:
        return f"Layout({self.cls.__name__})"

    def encode(self, value: Any, era: Era, /) -> bytes:
        return b"".join(
            field.kind.encode(getattr(value, field.name), era)
            for field in self.fields
            if era in field.eras
        )

    def decode(self, reader: Reader, era: Era, /) -> Any:
        values = {
            field.name: field.kind.decode(reader, era) for field in self.fields if era in field.eras
        }
        return self.cls(**values)


class Details:
    """A header structure followed by its children (StreamDetails, TopicDetails,
    ConsumerGroupDetails): exactly as many as the header's count field in era C (the client
    reads that many), up to the end of the body in eras A/B (the legacy SDK mappers read
    until the end)."""

    __slots__ = ("child", "cls", "count", "head", "names")

    def __init__(
        self, cls: type[Any], head: Kind, child: Kind, names: tuple[str, str], count: str
    ) -> None:
        self.cls = cls
        self.head = head
        self.child = child
        self.names = names  # (head field, children field) of cls
        self.count = count  # the head's field that counts the children

    def encode(self, value: Any, era: Era, /) -> bytes:
        head_name, children_name = self.names
        head, children = getattr(value, head_name), getattr(value, children_name)
        if era is Era.C and getattr(head, self.count) != len(children):
            raise LocalProtocolError(
                f"{self.cls.__name__}: {self.count} is {getattr(head, self.count)} "
                f"but {len(children)} follow"
            )
        return self.head.encode(head, era) + b"".join(self.child.encode(c, era) for c in children)

    def decode(self, reader: Reader, era: Era, /) -> Any:
        head = self.head.decode(reader, era)
        children = []
        if era is Era.C:
            count = getattr(head, self.count)
            if count > reader.remaining:
                malformed(f"{self.count} {count} does not fit the body")
            children = [self.child.decode(reader, era) for _ in range(count)]
        else:
            while not reader.at_end():
                children.append(self.child.decode(reader, era))
        head_name, children_name = self.names
        return self.cls(**{head_name: head, children_name: tuple(children)})


def decode_body(kind: Kind, payload: bytes, era: Era, what: str) -> Any:
    """Decode a whole body: every byte must belong to it."""
    reader = Reader(payload)
    value = kind.decode(reader, era)
    reader.expect_end(what)
    return value
