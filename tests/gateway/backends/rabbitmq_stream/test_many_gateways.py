"""Many gateways, one RabbitMQ (issue 14): RabbitMQ Stream publisher deduplication is the
broker's. Two real ``streamgate run`` processes on a real RabbitMQ 3.10.8; one client publisher
reference used through both, by raw RabbitMQ Stream frames: a retry through the other gateway,
both gateways publishing the same ids at once, and a gateway SIGKILLed with a Publish in flight
that is then retried through the other. The broker's stream (read with rstream, directly) holds
every publishing id exactly once, in order.
"""

from __future__ import annotations

from pathlib import Path

import trio

from protocols import rabbitmq_stream as rs
from protocols.rabbitmq_stream import ResponseCode
from tests.helpers.gateways import Gateway, running_gateways
from tests.helpers.rabbitmq_stream_wire import RabbitWire
from tests.helpers.rstream_direct import read_until

from .conftest import Broker, in_asyncio

LIMIT_S = 60.0
STREAM = "orders"
REFERENCE = "billing-app"


def body(i: int) -> bytes:
    return b"m%04d" % i


async def publisher(gateway: Gateway, publisher_id: int = 1) -> RabbitWire:
    wire = await RabbitWire.connected(gateway.addresses["rabbitmq_stream"])
    reply = await wire.call(rs.DeclarePublisher(
        correlation_id=wire.corr(), publisher_id=publisher_id, reference=REFERENCE, stream=STREAM,
    ))  # fmt: skip
    assert getattr(reply, "code", None) == ResponseCode.OK, reply
    return wire


async def publish(wire: RabbitWire, ids: range, publisher_id: int = 1) -> None:
    """One Publish frame of ``ids``; returns once every id is confirmed."""
    await wire.send(rs.Publish(
        publisher_id=publisher_id,
        messages=[rs.PublishedMessage(publishing_id=i, data=body(i)) for i in ids],
    ))  # fmt: skip
    confirmed: set[int] = set()
    while confirmed != set(ids):
        frame = await wire.take(lambda f: isinstance(f, rs.PublishConfirm | rs.PublishError))
        assert isinstance(frame, rs.PublishConfirm), frame
        confirmed.update(frame.publishing_ids)


async def sequence(wire: RabbitWire) -> int:
    reply = await wire.call(rs.QueryPublisherSequence(
        correlation_id=wire.corr(), reference=REFERENCE, stream=STREAM,
    ))  # fmt: skip
    assert isinstance(reply, rs.QueryPublisherSequenceResponse), reply
    return reply.sequence


async def test_one_reference_through_two_gateways_is_stored_once(
    broker: Broker, tmp_path: Path
) -> None:
    async with running_gateways(broker.url, tmp_path, 2) as (a, b):
        with trio.fail_after(LIMIT_S):
            admin = await RabbitWire.connected(a.addresses["rabbitmq_stream"])
            created = await admin.call(rs.Create(correlation_id=admin.corr(), stream=STREAM))
            assert getattr(created, "code", None) == ResponseCode.OK, created
            via_a, via_b = await publisher(a), await publisher(b)
            await publish(via_a, range(1, 51))
            assert await sequence(via_b) == 50  # the broker's answer, through the other one
            await publish(via_b, range(41, 81))  # a retry overlapping what a stored
            async with trio.open_nursery() as nursery:  # the same ids through both at once
                nursery.start_soon(publish, via_a, range(81, 101))
                nursery.start_soon(publish, via_b, range(81, 101))
            # A Publish in flight when its gateway is killed, retried through the other.
            await via_a.send(rs.Publish(
                publisher_id=1,
                messages=[rs.PublishedMessage(publishing_id=i, data=body(i))
                          for i in range(101, 121)],
            ))  # fmt: skip
            await a.kill()
            await publish(via_b, range(101, 121))
            assert await sequence(via_b) == 120
            for wire in (admin, via_a, via_b):
                await wire.aclose()
    # Everything the stream holds: reading goes on until nothing more comes (WAIT_S).
    got = await in_asyncio(
        lambda: read_until(broker.rstream(), STREAM, lambda got: len(got) > 120, strict=False)
    )
    assert [entry for _, entry, _ in got] == [body(i) for i in range(1, 121)]
