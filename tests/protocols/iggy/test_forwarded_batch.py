"""A client forwarding a producer's SendMessages batch (the Iggy backend's fast path) sends the
very bytes it was given; the server side decodes them as the producer's messages."""

from __future__ import annotations

import pytest

from protocols._wire import LocalProtocolError
from protocols.iggy import IggyRequest, Message, PartitionId, SendMessages
from protocols.iggy.batch import encode_batch
from tests.protocols.iggy.support import client, server


def test_a_forwarded_batch_goes_out_unchanged() -> None:
    messages = [Message(id=7 + i, payload=b"p%d" % i, origin_timestamp=1000 + i) for i in range(3)]
    batch = encode_batch(messages, partition_id=0, base_offset=0, base_timestamp=0,
                         offset_deltas=range(3))  # fmt: skip
    forwarded = SendMessages(
        stream_id="s", topic_id="t", partitioning=PartitionId(id=1), messages=(), batch=batch
    )
    data = client().send(forwarded)
    assert data.endswith(batch)
    receiver = server()
    receiver.receive_data(data)
    request = receiver.next_request()
    assert isinstance(request, IggyRequest)
    command = request.command
    assert isinstance(command, SendMessages)
    assert command.batch == batch
    assert [(m.id, m.payload, m.origin_timestamp) for m in command.messages] == [
        (m.id, m.payload, m.origin_timestamp) for m in messages
    ]


def test_a_forwarded_batch_shorter_than_its_header_is_refused() -> None:
    bad = SendMessages(
        stream_id="s", topic_id="t", partitioning=PartitionId(id=0), messages=(), batch=b"x"
    )
    with pytest.raises(LocalProtocolError):
        client().send(bad)
