"""Encoding AMQP 1.0 typed values (rabbitmq-stream.md §8): the remembered constructor when
it still fits the value, else the shortest form, as rstream writes.
"""

from __future__ import annotations

import struct
import uuid

from protocols._wire import LocalProtocolError

from .amqp_types import (
    COMPOUND,
    FIXED,
    INT_FORMATS,
    SIZE,
    TYPE_OF,
    U8_MAX,
    U32_MAX,
    VARIABLE,
    AmqpType,
    Array,
    Described,
    Value,
)

__all__ = ["encode_value", "write_value"]


# --- encoding ---------------------------------------------------------------------------------


def _default_code(v: Value) -> int:
    """rstream's (pyamqp's) choice for a value that brings no constructor of its own."""
    kind, x = v.type, v.value
    if kind is AmqpType.UINT:
        return 0x43 if x == 0 else 0x52 if _fits(x, 0, 255) else 0x70
    if kind is AmqpType.ULONG:
        return 0x44 if x == 0 else 0x53 if _fits(x, 0, 255) else 0x80
    if kind is AmqpType.INT:
        return 0x54 if _fits(x, -128, 127) else 0x71
    if kind is AmqpType.LONG:
        return 0x55 if _fits(x, -128, 127) else 0x81
    if kind in (AmqpType.BINARY, AmqpType.STRING, AmqpType.SYMBOL):
        small = len(_variable_bytes(v)) <= U8_MAX
        return {AmqpType.BINARY: 0xA0, AmqpType.STRING: 0xA1, AmqpType.SYMBOL: 0xA3}[kind] | (
            0 if small else 0x10
        )
    if kind is AmqpType.LIST and x == ():
        return 0x45
    if kind in (AmqpType.LIST, AmqpType.MAP, AmqpType.ARRAY):
        return {AmqpType.LIST: 0xC0, AmqpType.MAP: 0xC1, AmqpType.ARRAY: 0xE0}[kind]
    return _PLAIN_CODE[kind]


_PLAIN_CODE = {
    AmqpType.NULL: 0x40,
    AmqpType.BOOLEAN: 0x56,
    AmqpType.UBYTE: 0x50,
    AmqpType.USHORT: 0x60,
    AmqpType.BYTE: 0x51,
    AmqpType.SHORT: 0x61,
    AmqpType.FLOAT: 0x72,
    AmqpType.DOUBLE: 0x82,
    AmqpType.DECIMAL32: 0x74,
    AmqpType.DECIMAL64: 0x84,
    AmqpType.DECIMAL128: 0x94,
    AmqpType.CHAR: 0x73,
    AmqpType.TIMESTAMP: 0x83,
    AmqpType.UUID: 0x98,
    AmqpType.DESCRIBED: 0x00,
}


def _fits(x: object, low: int, high: int) -> bool:
    return isinstance(x, int) and low <= x <= high


def _variable_bytes(v: Value) -> bytes:
    x = v.value
    if v.type is AmqpType.BINARY and isinstance(x, bytes | bytearray | memoryview):
        return bytes(x)
    if v.type in (AmqpType.STRING, AmqpType.SYMBOL) and isinstance(x, str):
        try:
            return x.encode("utf-8" if v.type is AmqpType.STRING else "ascii")
        except UnicodeEncodeError:
            raise LocalProtocolError(f"{v.type.value} {x!r} cannot be encoded") from None
    raise LocalProtocolError(f"{v.type.value} value {x!r}")


def _usable(code: int | None, v: Value) -> bool:
    """Whether the remembered constructor can still carry ``v`` (it may have been replaced)."""
    if code is None or TYPE_OF.get(code) is not v.type:
        return False
    x = v.value
    if code in (0x41, 0x42):
        return x is (code == 0x41)
    if code in (0x43, 0x44):
        return x == 0
    if code == 0x45:
        return x == ()
    if code in (0x52, 0x53):
        return _fits(x, 0, 255)
    if code in (0x54, 0x55):
        return _fits(x, -128, 127)
    if code in (0xA0, 0xA1, 0xA3):
        return len(_variable_bytes(v)) <= U8_MAX
    return True  # full-width forms and compound sizes are checked while writing


def _code_for(v: Value) -> int:
    return v.code if _usable(v.code, v) and v.code is not None else _default_code(v)


def write_value(out: bytearray, v: Value) -> None:
    code = _code_for(v)
    if code == 0x00:
        d = v.value
        if not isinstance(d, Described):
            raise LocalProtocolError(f"described value {d!r}")
        out.append(code)
        write_value(out, d.descriptor)
        write_value(out, d.value)
        return
    if code in COMPOUND:
        count, body = _compound_body(v)
        if COMPOUND[code][1] == 1 and (len(body) + 1 > U8_MAX or count > U8_MAX):
            code |= 0x10  # the 8-bit form (remembered or default) no longer fits: widen
        out.append(code)
        _write_compound(out, code, count, body)
        return
    out.append(code)
    _write_body(out, code, v)


def _write_body(out: bytearray, code: int, v: Value) -> None:
    """``v`` without its constructor (also how array elements are written)."""
    x = v.value
    try:
        if code in FIXED:
            if code in INT_FORMATS:
                if v.type is AmqpType.BOOLEAN:
                    x = int(x is True)
                out += INT_FORMATS[code].pack(x)
            elif v.type is AmqpType.UUID and isinstance(x, uuid.UUID):
                out += x.bytes
            elif v.type is AmqpType.CHAR and isinstance(x, str) and len(x) == 1:
                out += ord(x).to_bytes(4, "big")
            elif FIXED[code][1]:  # decimals: raw bytes of the exact width
                if not isinstance(x, bytes) or len(x) != FIXED[code][1]:
                    raise LocalProtocolError(f"{v.type.value} needs {FIXED[code][1]} bytes")
                out += x
            return
        if code in VARIABLE:
            raw = _variable_bytes(v)
            out += _size_prefix(VARIABLE[code][1], len(raw))
            out += raw
            return
        count, body = _compound_body(v)
        _write_compound(out, code, count, body)
    except (struct.error, TypeError) as exc:
        raise LocalProtocolError(f"{v.type.value} {x!r}: {exc}") from None


def _size_prefix(width: int, n: int) -> bytes:
    if n > (U8_MAX if width == 1 else U32_MAX):
        raise LocalProtocolError(f"{n} does not fit a {width}-byte size")
    return SIZE[width].pack(n)


def _write_compound(out: bytearray, code: int, count: int, body: bytes | bytearray) -> None:
    width = COMPOUND[code][1]
    out += _size_prefix(width, len(body) + width)
    out += _size_prefix(width, count)
    out += body


def _compound_body(v: Value) -> tuple[int, bytearray]:
    body = bytearray()
    x = v.value
    if v.type is AmqpType.ARRAY:
        if not isinstance(x, Array):
            raise LocalProtocolError(f"array value {x!r}")
        if x.element_type is AmqpType.DESCRIBED:
            raise LocalProtocolError("arrays of described values are not supported")
        element = _array_code(x)
        body.append(element)
        for item in x.items:
            if item.type is not x.element_type:
                raise LocalProtocolError(f"{item.type.value} in an array of {x.element_type}")
            _write_body(body, element, item)
        return len(x.items), body
    if v.type is AmqpType.MAP:
        pairs: tuple[tuple[Value, Value], ...] = x  # type: ignore[assignment]
        for key, item in pairs:
            write_value(body, key)
            write_value(body, item)
        return 2 * len(pairs), body
    items: tuple[Value, ...] = x  # type: ignore[assignment]
    for item in items:
        write_value(body, item)
    return len(items), body


def _array_code(a: Array) -> int:
    codes = {item.code for item in a.items}
    if len(codes) == 1 and all(_usable(item.code, item) for item in a.items):
        return codes.pop()  # type: ignore[return-value]
    if not a.items:
        if a.element_code is not None and TYPE_OF.get(a.element_code) is a.element_type:
            return a.element_code
        return _default_code(Value(a.element_type, _EMPTY.get(a.element_type, 0)))
    defaults = {_default_code(item) for item in a.items}
    if len(defaults) == 1 and a.element_type not in _WIDENING:
        return defaults.pop()
    # Mixed widths share the widest form of the type.
    return max(c for c, t in TYPE_OF.items() if t is a.element_type and c not in (0x41, 0x42))


# Compound elements share one constructor, so the 8-bit form is only safe when it came that way.
_WIDENING = (AmqpType.LIST, AmqpType.MAP, AmqpType.ARRAY)
_EMPTY: dict[AmqpType, object] = {
    AmqpType.NULL: None,
    AmqpType.BOOLEAN: False,
    AmqpType.BINARY: b"",
    AmqpType.STRING: "",
    AmqpType.SYMBOL: "",
    AmqpType.LIST: (),
    AmqpType.MAP: (),
    AmqpType.ARRAY: Array(AmqpType.NULL),
    AmqpType.UUID: uuid.UUID(int=0),
    AmqpType.CHAR: "\0",
    AmqpType.FLOAT: 0.0,
    AmqpType.DOUBLE: 0.0,
}


def encode_value(v: Value) -> bytes:
    out = bytearray()
    write_value(out, v)
    return bytes(out)
