"""Declarative body layouts: almost every RabbitMQ Stream body is a flat run of fields (§5). A
``Struct`` subclass lists one kind per wire field, in the order of its dataclass fields, and
gets its encoder and decoder from that list; the few irregular bodies override them.

A kind is anything with ``encode(value) -> bytes``, ``decode(reader) -> value`` and
``min_size`` (its fewest bytes, used to refuse array counts before looping).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Final, Protocol, Self

from protocols._wire import LocalProtocolError

from .codes import OffsetType, ResponseCode
from .wire import Reader, malformed, pack, pack_bytes, pack_string

__all__ = [
    "BYTES",
    "BYTES16",
    "CODE",
    "I16",
    "I32",
    "I64",
    "NULLABLE_STRING",
    "OFFSET_SPEC",
    "PROPERTIES",
    "STRING",
    "U8",
    "U16",
    "U32",
    "U64",
    "ArrayOf",
    "Kind",
    "Nested",
    "OffsetSpec",
    "Optional",
    "Properties",
    "Struct",
    "pair",
]

Properties = tuple[tuple[str, str], ...]  # §2 "props": ordered pairs, kept as sent


class Kind(Protocol):
    @property
    def min_size(self) -> int: ...

    def encode(self, value: Any, /) -> bytes: ...

    def decode(self, reader: Reader, /) -> Any: ...


@dataclass(frozen=True, slots=True)
class _Int:
    name: str
    fmt: struct.Struct

    @property
    def min_size(self) -> int:
        return self.fmt.size

    def encode(self, value: int, /) -> bytes:
        return pack(self.fmt, value, self.name)

    def decode(self, reader: Reader, /) -> int:
        return reader.unpack(self.fmt, self.name)


class _Code(_Int):
    """A uint16 response code, decoded to ``ResponseCode`` when it is one of §4's."""

    __slots__ = ()

    def decode(self, reader: Reader, /) -> int:
        value = reader.unpack(self.fmt, self.name)
        try:
            return ResponseCode(value)
        except ValueError:
            return value


@dataclass(frozen=True, slots=True)
class _String:
    nullable: bool

    min_size: ClassVar[int] = 2

    def encode(self, value: str | None, /) -> bytes:
        if value is None and not self.nullable:
            raise LocalProtocolError("this string cannot be null")
        return pack_string(value, "string")

    def decode(self, reader: Reader, /) -> str | None:
        return reader.string("string", nullable=self.nullable)


@dataclass(frozen=True, slots=True)
class _Bytes:
    length: struct.Struct

    @property
    def min_size(self) -> int:
        return self.length.size

    def encode(self, value: bytes | None, /) -> bytes:
        return pack_bytes(value, "bytes", length=self.length)

    def decode(self, reader: Reader, /) -> bytes | None:
        return reader.bytes("bytes", length=self.length)


@dataclass(frozen=True, slots=True)
class ArrayOf:
    """§2 array: int32 count + elements; decoded to a tuple."""

    item: Kind

    min_size: ClassVar[int] = 4

    def encode(self, value: tuple[Any, ...], /) -> bytes:
        item = self.item
        if type(item) is _Int:  # a PublishConfirm's ids: one struct call, not one per id
            try:
                return struct.pack(f">i{len(value)}{item.fmt.format[1:]}", len(value), *value)
            except struct.error:
                pass  # said below, item by item, as any other kind says it
        parts = [pack(_I32_FMT, len(value), "array count")]
        parts.extend(item.encode(v) for v in value)
        return b"".join(parts)

    def decode(self, reader: Reader, /) -> tuple[Any, ...]:
        item = self.item
        n = reader.count("array", item.min_size)
        if type(item) is _Int:  # count() checked that n of them fit what is left
            return struct.unpack(
                f">{n}{item.fmt.format[1:]}", reader.take(n * item.min_size, "array")
            )
        return tuple(item.decode(reader) for _ in range(n))


@dataclass(frozen=True, slots=True)
class _Pair:
    """Two kinds in a row, decoded to a tuple (a property, a StreamStats entry)."""

    first: Kind
    second: Kind

    @property
    def min_size(self) -> int:
        return self.first.min_size + self.second.min_size

    def encode(self, value: tuple[Any, Any], /) -> bytes:
        return self.first.encode(value[0]) + self.second.encode(value[1])

    def decode(self, reader: Reader, /) -> tuple[Any, Any]:
        return self.first.decode(reader), self.second.decode(reader)


@dataclass(frozen=True, slots=True)
class Optional:
    """A trailing field that may be left out entirely (``None``): Subscribe's and
    ResolveOffsetSpec's properties, Open response properties on 3.10 (§5)."""

    item: Kind

    min_size: ClassVar[int] = 0

    def encode(self, value: Any, /) -> bytes:
        return b"" if value is None else self.item.encode(value)

    def decode(self, reader: Reader, /) -> Any:
        return None if reader.at_end() else self.item.decode(reader)


@dataclass(frozen=True, slots=True)
class Nested:
    """A ``Struct`` inside a body (an array element such as a Metadata broker)."""

    cls: type[Struct]

    @property
    def min_size(self) -> int:
        return sum(kind.min_size for kind in self.cls.LAYOUT)

    def encode(self, value: Struct, /) -> bytes:
        if type(value) is not self.cls:
            raise LocalProtocolError(f"{type(value).__name__} is not a {self.cls.__name__}")
        return value.encode_body()

    def decode(self, reader: Reader, /) -> Struct:
        return self.cls.decode_body(reader)


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetSpec:
    """§4 offset spec: a type, and for OFFSET (uint64) and TIMESTAMP (int64 ms) its value."""

    type: int
    value: int | None = None

    @classmethod
    def offset(cls, value: int) -> OffsetSpec:
        return cls(type=OffsetType.OFFSET, value=value)

    @classmethod
    def timestamp(cls, ms: int) -> OffsetSpec:
        return cls(type=OffsetType.TIMESTAMP, value=ms)


_I32_FMT = struct.Struct(">i")
U8: Final = _Int("u8", struct.Struct(">B"))
U16: Final = _Int("u16", struct.Struct(">H"))
U32: Final = _Int("u32", struct.Struct(">I"))
U64: Final = _Int("u64", struct.Struct(">Q"))
I16: Final = _Int("i16", struct.Struct(">h"))
I32: Final = _Int("i32", _I32_FMT)
I64: Final = _Int("i64", struct.Struct(">q"))
CODE: Final = _Code("response code", struct.Struct(">H"))
STRING: Final = _String(nullable=False)
NULLABLE_STRING: Final = _String(nullable=True)
BYTES: Final = _Bytes(_I32_FMT)  # nullable (-1), as SaslAuthenticate's data
BYTES16: Final = _Bytes(I16.fmt)  # a SASL challenge, int16 length (§5)
PROPERTIES: Final = ArrayOf(_Pair(STRING, STRING))


def pair(first: Kind, second: Kind) -> Kind:
    return _Pair(first, second)


@dataclass(frozen=True, slots=True)
class _OffsetSpecKind:
    min_size: ClassVar[int] = 2

    def encode(self, value: OffsetSpec, /) -> bytes:
        out = U16.encode(value.type)
        if value.type == OffsetType.OFFSET:
            return out + U64.encode(_value_of(value))
        if value.type == OffsetType.TIMESTAMP:
            return out + I64.encode(_value_of(value))
        if value.value is not None:
            raise LocalProtocolError(f"offset type {value.type} carries no value")
        return out

    def decode(self, reader: Reader, /) -> OffsetSpec:
        kind = U16.decode(reader)
        if kind == OffsetType.OFFSET:
            return OffsetSpec(type=OffsetType.OFFSET, value=U64.decode(reader))
        if kind == OffsetType.TIMESTAMP:
            return OffsetSpec(type=OffsetType.TIMESTAMP, value=I64.decode(reader))
        if kind not in _OFFSET_TYPES:
            malformed(f"unknown offset type {kind}")
        return OffsetSpec(type=OffsetType(kind))


def _value_of(spec: OffsetSpec) -> int:
    if spec.value is None:
        raise LocalProtocolError(f"offset type {spec.type} needs a value")
    return spec.value


OFFSET_SPEC: Final = _OffsetSpecKind()
_OFFSET_TYPES: Final = frozenset(int(t) for t in OffsetType)


class Struct:
    """Base of every body: ``LAYOUT`` holds one kind per leading dataclass field (fields after
    them, if any, are not on the wire: the codec fills them from the frame header)."""

    __slots__ = ()

    LAYOUT: ClassVar[tuple[Kind, ...]] = ()

    def encode_body(self) -> bytes:
        names = _field_names(type(self))
        return b"".join(
            kind.encode(getattr(self, n)) for n, kind in zip(names, self.LAYOUT, strict=True)
        )

    @classmethod
    def decode_body(cls, reader: Reader, **header: Any) -> Self:
        names = _field_names(cls)
        values = {n: kind.decode(reader) for n, kind in zip(names, cls.LAYOUT, strict=True)}
        return cls(**values, **header)


_names: dict[type[Struct], tuple[str, ...]] = {}


def _field_names(cls: type[Struct]) -> tuple[str, ...]:
    names = _names.get(cls)
    if names is None:
        every = tuple(f.name for f in fields(cls))  # type: ignore[arg-type]
        if len(every) < len(cls.LAYOUT):
            raise LocalProtocolError(f"{cls.__name__} has fewer fields than its layout")
        names = _names[cls] = every[: len(cls.LAYOUT)]
    return names
