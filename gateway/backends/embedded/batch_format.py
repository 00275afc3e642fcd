"""How one batch is framed in a segment file: a fixed 56-byte header, then the payload as given.

All integers little-endian (as in ``sg1``)::

    off size field
      0   8  base_offset      u64  offset of the batch's first record
      8   4  length           u32  bytes after this field: header rest (44) + payload
     12   4  crc              u32  CRC32C of every byte after this field (16 .. 12+length)
     16   1  magic            u8   version of this header: 1
     17   1  format_id        u8   how the payload is encoded, see STORED_FORMATS
     18   2  attributes       u16  Kafka transactions: bit 0 transactional, bit 1 control
                                  (a commit/abort marker), bit 2 commit (of a marker); else 0
     20   4  count            u32  records in the batch (> 0)
     24   8  first_timestamp  i64  µs, of the first record
     32   8  max_timestamp    i64  µs, the largest in the batch
     40   8  producer_id      i64  -1 = not idempotent
     48   2  producer_epoch   i16
     50   2  reserved         u16  0
     52   4  base_sequence    i32  sequence of the first record (idempotent producers)
     56      payload          the batch in its wire format, stored as received

Offset and length come first (as in Kafka's record batch) so a reader can walk a segment from
batch to batch with 12 bytes per step, and recovery can tell a torn tail (length past the end of
the file) from a corrupt batch (CRC mismatch). The payload is never re-encoded: a batch that
arrived in a stored wire format goes back out byte for byte.
"""

from __future__ import annotations

import struct
from operator import itemgetter
from typing import Final, NamedTuple

import crc32c

from gateway.backends.embedded import batch_codec
from gateway.model import Message, WireFormat
from gateway.translate.iggy.messages import WIRE_FORMAT as IGGY
from gateway.translate.kafka.messages import WIRE_FORMAT as KAFKA
from gateway.translate.rabbitmq_stream.messages import WIRE_FORMAT as RABBITMQ_STREAM

MAGIC: Final = 1
HEADER_SIZE: Final = 56
_LENGTH_END: Final = 12  # base_offset + length: what ``length`` does not count
MIN_LENGTH: Final = HEADER_SIZE - _LENGTH_END
MAX_BATCH_BYTES: Final = (1 << 31) - 1  # keeps positions within the u32 of the offset index

# The wire formats a stored payload may be in, by the ``format_id`` written in its header: the
# whole table of what this store can decode, so a reader needs nothing but this package. The ids
# are on disk: never renumber one. Adding a format is one entry here (each ``WireFormat`` carries
# its decoder).
# "sg1": the store's own encoding of canonical messages (batch_codec).
# "kafka": one Kafka RecordBatch v2 exactly as the producer sent it (its base offset field is
# the producer's; readers stamp the stored offset).
# "iggy": one Iggy era C batch as the producer sent it (256-byte header + frames, offset deltas
# 0..n-1); readers stamp the header.
# "rabbitmq_stream": the entries of one RabbitMQ Stream Publish as sent (simple entries and
# sub-entry batches, still compressed).
STORED_FORMATS: Final[dict[int, WireFormat]] = {
    0: batch_codec.FORMAT, 1: KAFKA, 2: IGGY, 3: RABBITMQ_STREAM,
}  # fmt: skip
FORMAT_IDS: Final[dict[WireFormat, int]] = {f: i for i, f in STORED_FORMATS.items()}

# Header attributes (what a reader of committed data needs without the payload; txn_index.py).
ATTR_TRANSACTIONAL: Final = 1
ATTR_CONTROL: Final = 2
ATTR_COMMIT: Final = 4

# A payload as the pieces it is written from (os.writev), so stamping never copies it.
Payload = tuple[bytes | memoryview, ...]

_HEADER = struct.Struct("<QIIBBHIqqqhHi")
_REST = struct.Struct("<BBHIqqqhHi")  # the header after the CRC: what the CRC covers first
_I64 = struct.Struct("<q")
assert _HEADER.size == HEADER_SIZE


class BatchHeader(NamedTuple):
    base_offset: int
    length: int
    crc: int
    magic: int
    format_id: int
    attributes: int
    records: int
    first_timestamp_us: int
    max_timestamp_us: int
    producer_id: int
    producer_epoch: int
    reserved: int
    base_sequence: int

    @property
    def size(self) -> int:
        """Bytes the whole batch takes in the file."""
        return self.length + _LENGTH_END

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.records


unpack_header = _HEADER.unpack_from


def parse_header(buf: bytes | memoryview, pos: int = 0) -> BatchHeader:
    return BatchHeader._make(_HEADER.unpack_from(buf, pos))


def pack_header(
    *,
    base_offset: int,
    format_id: int,
    count: int,
    first_timestamp_us: int,
    max_timestamp_us: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    payload: Payload,
    attributes: int = 0,
) -> bytes:
    rest = _REST.pack(
        MAGIC,
        format_id,
        attributes,
        count,
        first_timestamp_us,
        max_timestamp_us,
        producer_id,
        producer_epoch,
        0,
        base_sequence,
    )
    crc = crc32c.crc32c(rest)
    for part in payload:
        crc = crc32c.crc32c(part, crc)
    length = MIN_LENGTH + sum(map(len, payload))
    return struct.pack("<QII", base_offset, length, crc) + rest


def check_batch(buf: bytes | memoryview, pos: int, header: BatchHeader) -> bool:
    """Whether the whole batch at ``pos`` of ``buf`` is intact (magic, format, count, CRC)."""
    if header.magic != MAGIC or header.format_id not in STORED_FORMATS or header.records <= 0:
        return False
    end = pos + header.size
    if header.length < MIN_LENGTH or end > len(buf):
        return False
    return bool(crc32c.crc32c(memoryview(buf)[pos + 16 : end]) == header.crc)


def stamp_uniform_sg1(payload: bytes, timestamp_us: int) -> Payload | None:
    """The payload with its uniform timestamp set, or None when the batch is not uniform-0.

    Relies on the documented ``sg1`` layout (``u32 count · u8 flags · i64 timestamp`` when the
    UNIFORM_TS flag is set): stamping a batch whose records all carry 0 rebuilds no ``Message``
    and copies no byte (the pieces go to ``os.writev`` as they are).
    """
    if len(payload) < 13 or not payload[4] & batch_codec.F_UNIFORM_TS:
        return None
    if _I64.unpack_from(payload, 5)[0] != 0:
        return None
    view = memoryview(payload)
    return (view[:5], _I64.pack(timestamp_us), view[13:])


_timestamp_of = itemgetter(3)  # Message.timestamp_us; itemgetter keeps the scan in C


def encode_messages(
    messages: list[Message] | tuple[Message, ...], now_us: int
) -> tuple[Payload, int, int]:
    """``sg1`` payload, first and max timestamp; records with timestamp 0 get ``now_us``."""
    stamps = list(map(_timestamp_of, messages))
    if 0 in stamps:
        if stamps.count(0) == len(stamps):
            stamped = stamp_uniform_sg1(batch_codec.encode(messages), now_us)
            assert stamped is not None  # all-equal timestamps are always encoded uniform
            return stamped, now_us, now_us
        messages = [m if m[3] else m._replace(timestamp_us=now_us) for m in messages]
        stamps = list(map(_timestamp_of, messages))
    return (batch_codec.encode(messages),), stamps[0], max(stamps)


def message_size(m: Message) -> int:
    """What ``max_message_bytes`` limits: key, value and headers of one record."""
    size = len(m.value) + len(m.key or b"")
    for h in m.headers:
        size += len(h.name.encode("utf-8", "surrogatepass")) + len(h.value)
    return size
