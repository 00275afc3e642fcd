"""The canonical batch encoding ``sg1``: how the embedded log stores messages of any protocol.

Columnar, so that encoding and decoding a batch of 1,000 records is a handful of C-level
operations (array, bytes.join, slicing) rather than per-record struct packing:

    u32 count · u8 flags · i64 timestamps (one when all equal, flag UNIFORM_TS, else count)
    · u32 value lengths[count]
    · [KEYS]    i32 key lengths[count] (-1 = no key) · key bytes
    · [HEADERS] u32 header-block lengths[count] · blocks, each repeated
                (u8 kind · u16 name length · name UTF-8 · u32 value length · value)
    · [IDS]     u128 ids[count]
    · value bytes

All integers little-endian. Offsets are not stored per record: a batch's records are
base_offset, base_offset+1, ... (the store keeps base_offset in its own batch header).
"""

from __future__ import annotations

import struct
import sys
from array import array
from itertools import accumulate, pairwise, repeat
from typing import Final

from gateway.model.errors import CorruptMessage
from gateway.model.messages import Header, HeaderKind, Message, WireBatch, WireFormat

F_UNIFORM_TS: Final = 0x01
F_KEYS: Final = 0x02
F_HEADERS: Final = 0x04
F_IDS: Final = 0x08

_HEAD = struct.Struct("<IB")
_I64 = struct.Struct("<q")
_HDR_ITEM = struct.Struct("<BH")
_U32 = struct.Struct("<I")
_SWAP = sys.byteorder == "big"
_KINDS = {k.value: k for k in HeaderKind}


def _arr(code: str, values: object) -> bytes:
    a: array[int] = array(code, values)  # type: ignore[call-overload]
    if _SWAP:
        a.byteswap()
    return a.tobytes()


def _unarr(code: str, data: bytes | memoryview, count: int, pos: int) -> tuple[array[int], int]:
    a: array[int] = array(code)
    end = pos + a.itemsize * count
    if end > len(data):
        raise CorruptMessage("sg1 batch truncated")
    a.frombytes(data[pos:end])
    if _SWAP:
        a.byteswap()
    return a, end


def _encode_headers(headers: tuple[Header, ...]) -> bytes:
    parts = []
    for name, value, kind in headers:
        n = name.encode("utf-8", "surrogatepass")
        parts.append(_HDR_ITEM.pack(int(kind), len(n)) + n + _U32.pack(len(value)) + value)
    return b"".join(parts)


def encode(messages: list[Message] | tuple[Message, ...]) -> bytes:
    """Encode records; timestamps must already be set (the store stamps 0 before this)."""
    count = len(messages)
    values = [m[0] for m in messages]
    stamps = [m[3] for m in messages]
    flags = 0
    parts: list[bytes] = [b""]
    if count and min(stamps) == max(stamps):
        flags |= F_UNIFORM_TS
        parts.append(_I64.pack(stamps[0]))
    else:
        parts.append(_arr("q", stamps))
    parts.append(_arr("I", map(len, values)))
    keys = [m[1] for m in messages]
    if any(k is not None for k in keys):
        flags |= F_KEYS
        parts.append(_arr("i", [-1 if k is None else len(k) for k in keys]))
        parts.append(b"".join([k for k in keys if k]))
    if any(m[2] for m in messages):
        flags |= F_HEADERS
        blocks = [_encode_headers(m[2]) if m[2] else b"" for m in messages]
        parts.append(_arr("I", map(len, blocks)))
        parts.append(b"".join(blocks))
    if any(m[5] for m in messages):
        flags |= F_IDS
        parts.append(b"".join([m[5].to_bytes(16, "little") for m in messages]))
    parts.append(b"".join(values))
    parts[0] = _HEAD.pack(count, flags)
    return b"".join(parts)


def _decode_headers(block: bytes) -> tuple[Header, ...]:
    out = []
    pos = 0
    end = len(block)
    while pos < end:
        if pos + 3 > end:
            raise CorruptMessage("sg1 header truncated")
        kind, nlen = _HDR_ITEM.unpack_from(block, pos)
        pos += 3
        name = block[pos : pos + nlen].decode("utf-8", "surrogatepass")
        pos += nlen
        if pos + 4 > end:
            raise CorruptMessage("sg1 header truncated")
        (vlen,) = _U32.unpack_from(block, pos)
        pos += 4
        if pos + vlen > end:
            raise CorruptMessage("sg1 header truncated")
        out.append(Header(name, block[pos : pos + vlen], _KINDS.get(kind, HeaderKind.RAW)))
        pos += vlen
    return tuple(out)


def _slices(blob: bytes, lengths: list[int] | array[int], pos: int) -> tuple[list[bytes], int]:
    ends = list(accumulate(lengths, initial=pos))
    if ends[-1] > len(blob):
        raise CorruptMessage("sg1 batch truncated")
    return [blob[a:b] for a, b in pairwise(ends)], ends[-1]


def decode(data: bytes, base_offset: int = 0) -> list[Message]:
    """Decode an ``sg1`` batch; raises ``CorruptMessage`` on anything inconsistent."""
    if len(data) < _HEAD.size:
        raise CorruptMessage("sg1 batch truncated")
    count, flags = _HEAD.unpack_from(data, 0)
    pos = _HEAD.size
    if count > len(data):  # every record costs at least 4 bytes of length
        raise CorruptMessage("sg1 record count larger than the batch")
    if flags & F_UNIFORM_TS:
        if pos + 8 > len(data):
            raise CorruptMessage("sg1 batch truncated")
        stamps: object = repeat(_I64.unpack_from(data, pos)[0], count)
        pos += 8
    else:
        stamps, pos = _unarr("q", data, count, pos)
    vlens, pos = _unarr("I", data, count, pos)
    keys: object = repeat(None, count)
    headers: object = repeat((), count)
    ids: object = repeat(0, count)
    if flags & F_KEYS:
        klens, pos = _unarr("i", data, count, pos)
        present = [n for n in klens if n > 0]
        if any(n < -1 for n in klens):
            raise CorruptMessage("sg1 negative key length")
        blobs, pos = _slices(data, present, pos)
        it = iter(blobs)
        keys = [None if n < 0 else (next(it) if n else b"") for n in klens]
    if flags & F_HEADERS:
        hlens, pos = _unarr("I", data, count, pos)
        blocks, pos = _slices(data, hlens, pos)
        headers = [_decode_headers(b) if b else () for b in blocks]
    if flags & F_IDS:
        end = pos + 16 * count
        if end > len(data):
            raise CorruptMessage("sg1 batch truncated")
        ids = [int.from_bytes(data[p : p + 16], "little") for p in range(pos, end, 16)]
        pos = end
    values, pos = _slices(data, vlens, pos)
    if pos != len(data):
        raise CorruptMessage("sg1 batch has trailing bytes")
    offsets = range(base_offset, base_offset + count)
    return list(
        map(Message._make, zip(values, keys, headers, stamps, offsets, ids, strict=False))  # type: ignore[call-overload]
    )


def _decode_wire(wire: WireBatch) -> list[Message]:
    return decode(wire.data, wire.base_offset)


FORMAT: Final = WireFormat(name="sg1", decode=_decode_wire)
