"""What a Kafka or Rog reader cannot get of a message from another protocol is reported through
``lossy(field)`` (DESIGN.md §3; the listeners count it in ``streamgate_translation_lossy_total``),
and a message id reaches a Kafka reader as the ``streamgate.id`` header, which a Kafka producer
sending the record back turns into the id again."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from gateway.model import Header, HeaderKind, Message, WireBatch
from gateway.translate.kafka.messages import CARRIED_ID, WIRE_FORMAT, decode_wire, encode_messages
from gateway.translate.rog import first_message
from protocols.kafka import decode_batch
from protocols.rog import FetchOk


def counter() -> tuple[Counter[str], Callable[[str], None]]:
    counts: Counter[str] = Counter()
    return counts, lambda field: counts.update((field,))


def test_kafka_reader_loses_kinds_and_microseconds_keeps_the_id() -> None:
    counts, lossy = counter()
    typed = Message(b"v", b"k", (Header("n", b"\x01\x00\x00\x00", HeaderKind.INT32),),
                    1_700_000_000_123_456, 7, 99)  # fmt: skip
    plain = Message(b"w", None, (Header("h", b"x"),), 1_700_000_000_124_000, 8)
    data = encode_messages([typed, plain], lossy)
    assert counts == Counter({"headers": 1, "timestamp": 1})
    _, records = decode_batch(data)
    assert records[0].headers == (
        ("n", b"\x01\x00\x00\x00"),
        (CARRIED_ID, (99).to_bytes(16, "big")),
    )
    assert records[1].headers == (("h", b"x"),)
    # produced back by a Kafka client as it was read: the id is the message's id again
    again = decode_wire(WireBatch(format=WIRE_FORMAT, data=data, count=2, base_offset=7))
    assert [m.id for m in again] == [99, 0]
    assert again[0].headers == (Header("n", b"\x01\x00\x00\x00"),)


def test_rog_reader_loses_key_headers_and_id_not_time() -> None:
    counts, lossy = counter()
    full = Message(b"v", b"k", (Header("h", b"x"),), 1_700_000_000_123_456, 0, 5)
    assert first_message((full,), lossy) == FetchOk(data=b"v")
    assert counts == Counter({"key": 1, "headers": 1, "id": 1})
    counts.clear()
    assert first_message((Message(b"bare", timestamp_us=1),), lossy) == FetchOk(data=b"bare")
    assert counts == Counter()
