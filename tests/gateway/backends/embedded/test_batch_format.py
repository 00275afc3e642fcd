"""The store's table of stored formats: ids fixed on disk, one ``WireFormat`` per protocol (the
translator's own), and a batch stored in one comes back in it, decoded by its own decoder."""

from __future__ import annotations

from pathlib import Path

import trio

from gateway.backends.embedded import batch_codec, open_embedded
from gateway.backends.embedded.batch_format import FORMAT_IDS, STORED_FORMATS, parse_header
from gateway.model import Append, Message, MessageBatch, Read, WireBatch
from gateway.translate.iggy import messages as iggy
from gateway.translate.kafka import messages as kafka
from gateway.translate.rabbitmq_stream import messages as rabbitmq_stream

from .support import TOPIC, create, logs


def test_format_ids_are_the_ones_on_disk() -> None:
    # Segment files written by earlier versions name their payload's format by these ids.
    assert {i: f.name for i, f in STORED_FORMATS.items()} == {
        0: "sg1", 1: "kafka", 2: "iggy", 3: "rabbitmq_stream",
    }  # fmt: skip
    assert STORED_FORMATS[0] is batch_codec.FORMAT
    assert STORED_FORMATS[1] is kafka.WIRE_FORMAT
    assert STORED_FORMATS[2] is iggy.WIRE_FORMAT
    assert STORED_FORMATS[3] is rabbitmq_stream.WIRE_FORMAT
    assert {f: i for i, f in STORED_FORMATS.items()} == FORMAT_IDS


async def test_a_stored_batch_keeps_its_format(tmp_path: Path) -> None:
    sent = [Message(value=b"v%d" % i, key=b"k", timestamp_us=1_000_000 + i) for i in range(3)]
    forms = [
        WireBatch(format=batch_codec.FORMAT, data=batch_codec.encode(sent), count=3),
        WireBatch(format=kafka.WIRE_FORMAT, data=kafka.encode_append(sent, now_us=1), count=3),
    ]
    with trio.fail_after(10):
        async with open_embedded(tmp_path, fsync="never") as backend:
            assert backend.capabilities.wire_formats == frozenset(STORED_FORMATS.values())
            await create(backend)
            for wire in forms:
                await backend.append(
                    Append(topic=TOPIC, partition=0, batch=MessageBatch(wire=wire))
                )
            read = await backend.read(Read(topic=TOPIC, partition=0, offset=0, whole_batches=True))
    batches = read.batches
    assert [b.wire.format if b.wire else None for b in batches] == [f.format for f in forms]
    assert [(m.offset, m.value, m.key) for b in batches for m in b.messages] == [
        (base + i, m.value, m.key) for base in (0, 3) for i, m in enumerate(sent)
    ]
    [segment] = logs(tmp_path)
    data = segment.read_bytes()
    first = parse_header(data)
    assert (first.format_id, parse_header(data, first.size).format_id) == (0, 1)
