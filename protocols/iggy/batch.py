"""Message layouts of the three eras (iggy.md §6.1/§6.3 batches, §9.2 64-byte headers, §9.3).

Era C checksums: a frame's is XXH3-64 of the frame from byte 8 (after the checksum) to the end
of its user headers; a batch's is XXH3-64 of its first five u64 fields, its message count and
every frame checksum in order (§6.1; checked against V5/V6 of §10).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from xxhash import xxh3_64_intdigest

from protocols._wire import LocalProtocolError

from .codes import Era
from .columns import uniform_frames
from .frames_messages import Message
from .headers import decode_headers, encode_headers
from .status import Status
from .wire import U32_MAX, Reader, malformed, pack_u8, pack_u32, pack_u64, pack_u128

__all__ = [
    "BATCH_HEADER_SIZE",
    "FRAME_HEADER_SIZE",
    "LEGACY_HEADER_SIZE",
    "decode_batch",
    "decode_batch_messages",
    "decode_era_a_polled",
    "decode_era_a_sent",
    "decode_era_b_message",
    "encode_batch",
    "encode_era_a_polled",
    "encode_era_a_sent",
    "encode_era_b_message",
    "encode_polled",
    "restamp_batch",
    "restamp_pieces",
    "split_batches",
]

BATCH_HEADER_SIZE = 256
FRAME_HEADER_SIZE = 48
LEGACY_HEADER_SIZE = 64  # era B
_RESERVED = bytes(BATCH_HEADER_SIZE - 52)
# A frame header after its checksum: id (two u64 halves), offset delta, timestamp delta, user
# headers length, payload length, 8 reserved bytes.
_FRAME_REST = struct.Struct("<QQIIII8x")
_FRAME_HEADER = struct.Struct("<QQQIIIIQ")  # the whole 48 bytes, checksum first
_U64 = struct.Struct("<Q")
_MASK64 = (1 << 64) - 1


# --- era C: batches ---------------------------------------------------------------------------


def encode_batch(
    messages: Sequence[Message],
    *,
    partition_id: int,
    base_offset: int,
    base_timestamp: int,
    offset_deltas: Sequence[int],
) -> bytes:
    """One batch; the origin timestamp is the smallest of the messages' (§6.1)."""
    origin = min((m.origin_timestamp for m in messages), default=0)
    frames = []
    checksums = []
    pack_rest, pack_u64_ = _FRAME_REST.pack, _U64.pack
    for message, offset_delta in zip(messages, offset_deltas, strict=True):
        headers = encode_headers(message.headers, Era.C) if message.headers else b""
        message_id = message.id
        try:
            body = (
                pack_rest(
                    message_id & _MASK64,
                    message_id >> 64,
                    offset_delta,
                    message.origin_timestamp - origin,
                    len(headers),
                    len(message.payload),
                )
                + message.payload
                + headers
            )
        except struct.error as exc:
            raise LocalProtocolError(
                f"message {message_id}: id, offset delta {offset_delta} or timestamp delta "
                f"{message.origin_timestamp - origin} does not fit its field ({exc})"
            ) from None
        checksum = pack_u64_(xxh3_64_intdigest(body))
        checksums.append(checksum)
        frames.append(checksum)
        frames.append(body)
    length = BATCH_HEADER_SIZE + sum(len(frame) for frame in frames)
    fields = b"".join(
        pack_u64(value, what)
        for value, what in (
            (partition_id, "partition id"),
            (base_offset, "base offset"),
            (base_timestamp, "base timestamp"),
            (origin, "origin timestamp"),
            (length, "batch length"),
        )
    )
    count = pack_u32(len(checksums), "message count")
    batch_checksum = xxh3_64_intdigest(fields + count + b"".join(checksums))
    return b"".join((fields, pack_u64(batch_checksum), count, _RESERVED, *frames))


def decode_batch(reader: Reader, *, verify: bool) -> list[Message]:
    """One batch, its messages with absolute offsets and timestamps. ``verify`` checks both
    checksums, as the real server does at admission (4027 / 4039, §6.1); the client does not."""
    return _decode_batch(reader, verify=verify, sent=False)[0]


def decode_batch_messages(batch: bytes) -> list[Message]:
    """The messages of one checked producer batch (``sent_batch``), with only what a producer
    sets: id, payload, headers, origin timestamp."""
    return _decode_batch(Reader(batch), verify=False, sent=True)[0]


def _decode_batch(reader: Reader, *, verify: bool, sent: bool) -> tuple[list[Message], bool]:
    fields = reader.take(40, "batch header")
    batch_reader = Reader(fields)
    _partition_id = batch_reader.u64()
    base_offset = batch_reader.u64()
    base_timestamp = batch_reader.u64()
    origin = batch_reader.u64()
    length = batch_reader.u64()
    batch_checksum = reader.u64("batch checksum")
    count_raw = reader.take(4, "message count")
    count = int.from_bytes(count_raw, "little")
    if reader.take(len(_RESERVED), "batch reserved bytes") != _RESERVED:
        malformed("the batch header's reserved bytes are not zero")
    if length < BATCH_HEADER_SIZE:
        malformed(f"batch length {length} is below the 256-byte header")
    frames = reader.sub(length - BATCH_HEADER_SIZE, "batch")
    data, end = frames.data, frames.end
    unpack_header = _FRAME_HEADER.unpack_from
    messages = []
    checksums = []
    pos = frames.pos
    in_order = base_offset == 0
    for i in range(count):
        start = pos
        if pos + FRAME_HEADER_SIZE > end:
            malformed("a message header runs past the end of its batch")
        (checksum, id_low, id_high, offset_delta, timestamp_delta, headers_length,
         payload_length, reserved) = unpack_header(data, pos)  # fmt: skip
        if reserved != 0:
            malformed("a message's reserved field is not zero")
        message_id = id_high << 64 | id_low
        pos += FRAME_HEADER_SIZE
        payload_end = pos + payload_length
        headers_end = payload_end + headers_length
        if headers_end > end:
            malformed(f"message {message_id} runs past the end of its batch")
        payload = bytes(data[pos:payload_end])
        headers = (
            decode_headers(Reader(data, payload_end, headers_end), Era.C) if headers_length else ()
        )
        pos = headers_end
        if verify and xxh3_64_intdigest(data[start + 8 : pos]) != checksum:
            malformed(f"message {message_id} has a wrong checksum", Status.INVALID_MESSAGE_CHECKSUM)
        checksums.append(data[start : start + 8])
        if sent:
            in_order = in_order and offset_delta == i
            messages.append(
                Message(
                    id=message_id,
                    payload=payload,
                    headers=headers,
                    origin_timestamp=origin + timestamp_delta,
                )
            )
            continue
        messages.append(
            Message(
                id=message_id,
                payload=payload,
                headers=headers,
                offset=base_offset + offset_delta,
                timestamp=base_timestamp,
                origin_timestamp=origin + timestamp_delta,
                checksum=checksum,
            )
        )
    frames.pos = pos
    frames.expect_end("batch's messages")
    if verify and xxh3_64_intdigest(fields + count_raw + b"".join(checksums)) != batch_checksum:
        malformed("the batch checksum is wrong", Status.INVALID_BATCH_CHECKSUM)
    return messages, in_order


_BATCH_FIELDS = struct.Struct("<QQQQQ")  # partition id, base offset, base ts, origin ts, length
_U32 = struct.Struct("<I")


def restamp_batch(
    batch: bytes | memoryview,
    *,
    partition_id: int,
    base_offset: int,
    base_timestamp: int,
    skip: int = 0,
    limit: int | None = None,
) -> tuple[bytes, int]:
    """``restamp_pieces`` joined into one ``bytes``."""
    pieces, count = restamp_pieces(
        batch,
        partition_id=partition_id,
        base_offset=base_offset,
        base_timestamp=base_timestamp,
        skip=skip,
        limit=limit,
    )
    return b"".join(pieces), count


def restamp_pieces(
    batch: bytes | memoryview,
    *,
    partition_id: int,
    base_offset: int,
    base_timestamp: int,
    skip: int = 0,
    limit: int | None = None,
) -> tuple[tuple[bytes | memoryview, ...], int]:
    """A stored producer batch (its 256-byte header and frames as sent, offset deltas 0, 1, 2,
    ...) ready to be served: frames ``skip`` .. ``skip + limit`` kept untouched (their deltas
    stay relative to ``base_offset``, so offsets come out right), the header stamped and the
    batch checksum recomputed over the kept frames (§6.1/§6.3). Returns the new header and a
    view of the kept frames (nothing copied; ``()`` when no frame is kept), and how many
    messages they hold. The frames were checked when the batch was admitted; only their
    lengths are read here."""
    data = batch if isinstance(batch, bytes) else bytes(batch)
    if len(data) < BATCH_HEADER_SIZE:
        malformed("a stored batch shorter than its header")
    origin = _U64.unpack_from(data, 24)[0]
    total = _U32.unpack_from(data, 48)[0]
    end = total if limit is None else min(total, skip + limit)
    frames = uniform_frames(data, BATCH_HEADER_SIZE, len(data), total)
    if frames is not None:  # frames of one size: where each starts is known
        count = max(0, end - skip)
        first = BATCH_HEADER_SIZE + min(skip, total) * frames.stride
        last = first + count * frames.stride
        checksums = frames.checksums(skip, skip + count) if count else b""
    else:
        first, last, checksums, count = _kept_frames(data, skip, end)
    if not count:
        return (), 0
    fields = _BATCH_FIELDS.pack(
        partition_id, base_offset, base_timestamp, origin, BATCH_HEADER_SIZE + last - first
    )
    count_raw = _U32.pack(count)
    checksum = xxh3_64_intdigest(b"".join((fields, count_raw, checksums)))
    header = b"".join((fields, _U64.pack(checksum), count_raw, _RESERVED))
    return (header, memoryview(data)[first:last]), count


def _kept_frames(data: bytes, skip: int, end: int) -> tuple[int, int, bytes, int]:
    """Where frames ``skip .. end`` start and end, their checksums and count, frame by frame."""
    pos = BATCH_HEADER_SIZE
    first = last = pos
    checksums = []
    for i in range(end):
        if i == skip:
            first = pos
        if pos + FRAME_HEADER_SIZE > len(data):
            malformed("a stored batch's frame runs past its end")
        headers_length, payload_length = _LENGTHS.unpack_from(data, pos + 32)
        if i >= skip:
            checksums.append(data[pos : pos + 8])
        pos += FRAME_HEADER_SIZE + payload_length + headers_length
        last = pos
    if pos > len(data):
        malformed("a stored batch's frame runs past its end")
    return first, last, b"".join(checksums), len(checksums)


_LENGTHS = struct.Struct("<II")  # user headers length, payload length (frame offsets 32, 36)


def encode_polled(messages: Sequence[Message], partition_id: int) -> list[bytes]:
    """Polled messages as era C batches, one per run that fits a batch (``split_batches``)."""
    return [
        encode_batch(
            run,
            partition_id=partition_id,
            base_offset=run[0].offset,
            base_timestamp=run[0].timestamp,
            offset_deltas=[m.offset - run[0].offset for m in run],
        )
        for run in split_batches(messages)
    ]


def split_batches(messages: Sequence[Message]) -> list[list[Message]]:
    """Runs that fit one batch each (§6.3): one append timestamp, offsets and origin
    timestamps within a u32 of the batch's base."""
    batches: list[list[Message]] = []
    low = high = 0
    for message in messages:
        if batches:
            first = batches[-1][0]
            new_low = min(low, message.origin_timestamp)
            new_high = max(high, message.origin_timestamp)
            if (
                message.timestamp == first.timestamp
                and 0 <= message.offset - first.offset <= U32_MAX
                and new_high - new_low <= U32_MAX
            ):
                batches[-1].append(message)
                low, high = new_low, new_high
                continue
        batches.append([message])
        low = high = message.origin_timestamp
    return batches


# --- era B: 64-byte message headers -----------------------------------------------------------


def encode_era_b_message(message: Message) -> bytes:
    headers = encode_headers(message.headers, Era.B)
    return b"".join(
        (
            pack_u64(message.checksum, "checksum"),
            pack_u128(message.id, "message id"),
            pack_u64(message.offset, "offset"),
            pack_u64(message.timestamp, "timestamp"),
            pack_u64(message.origin_timestamp, "origin timestamp"),
            pack_u32(len(headers), "user headers length"),
            pack_u32(len(message.payload), "payload length"),
            bytes(8),
            message.payload,
            headers,
        )
    )


def decode_era_b_message(reader: Reader) -> Message:
    checksum = reader.u64("checksum")
    message_id = reader.u128("message id")
    offset = reader.u64("offset")
    timestamp = reader.u64("timestamp")
    origin = reader.u64("origin timestamp")
    headers_length = reader.u32("user headers length")
    payload_length = reader.u32("payload length")
    if reader.u64("message reserved field") != 0:
        malformed("a message's reserved field is not zero")
    payload = reader.take(payload_length, "payload")
    headers = decode_headers(reader.sub(headers_length, "user headers"), Era.B)
    return Message(
        id=message_id,
        payload=payload,
        headers=headers,
        offset=offset,
        timestamp=timestamp,
        origin_timestamp=origin,
        checksum=checksum,
    )


# --- era A ------------------------------------------------------------------------------------


def _era_a_headers(message: Message) -> bytes:
    headers = encode_headers(message.headers, Era.A)
    return pack_u32(len(headers), "headers length") + headers


def encode_era_a_sent(message: Message) -> bytes:
    """``[id u128][headers_len u32][headers][payload_len u32][payload]`` (§9.3)."""
    return b"".join(
        (
            pack_u128(message.id, "message id"),
            _era_a_headers(message),
            pack_u32(len(message.payload), "payload length"),
            message.payload,
        )
    )


def decode_era_a_sent(reader: Reader) -> Message:
    message_id = reader.u128("message id")
    headers = decode_headers(reader.sub(reader.u32("headers length"), "headers"), Era.A)
    return Message(id=message_id, payload=reader.bytes32("payload"), headers=headers)


def encode_era_a_polled(message: Message) -> bytes:
    """``[offset u64][state u8][timestamp u64][id u128][checksum u32][headers_len u32]
    [headers][length u32][payload]`` (§9.3)."""
    if message.checksum > U32_MAX:
        raise LocalProtocolError(f"checksum {message.checksum} does not fit era A's u32")
    return b"".join(
        (
            pack_u64(message.offset, "offset"),
            pack_u8(message.state, "message state"),
            pack_u64(message.timestamp, "timestamp"),
            pack_u128(message.id, "message id"),
            pack_u32(message.checksum, "checksum"),
            _era_a_headers(message),
            pack_u32(len(message.payload), "payload length"),
            message.payload,
        )
    )


def decode_era_a_polled(reader: Reader) -> Message:
    offset = reader.u64("offset")
    state = reader.u8("message state")
    timestamp = reader.u64("timestamp")
    message_id = reader.u128("message id")
    checksum = reader.u32("checksum")
    headers = decode_headers(reader.sub(reader.u32("headers length"), "headers"), Era.A)
    return Message(
        id=message_id,
        payload=reader.bytes32("payload"),
        headers=headers,
        offset=offset,
        timestamp=timestamp,
        checksum=checksum,
        state=state,
    )
