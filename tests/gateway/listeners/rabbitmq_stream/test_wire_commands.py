"""Commands neither rstream 1.1.1 nor rbfly sends in these tests, over raw frames (the codec's
client role): StreamStats, ExchangeCommandVersions and Deliver v2, CreateSuperStream with its
own partition names, Route and Partitions, DeleteSuperStream; and a Kafka topic with several
partitions seen as a super stream."""

from __future__ import annotations

import trio
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from gateway.app import Running
from protocols import rabbitmq_stream as rs
from protocols.rabbitmq_stream import Key, OffsetSpec, ResponseCode
from protocols.rabbitmq_stream.chunk import decode_chunk
from tests.helpers.rabbitmq_stream_wire import RabbitWire, delivered

OK = ResponseCode.OK


async def publish(wire: RabbitWire, stream: str, bodies: list[bytes], first_id: int = 1) -> None:
    reply = await wire.call(rs.DeclarePublisher(correlation_id=wire.corr(), publisher_id=7,
                                                reference="", stream=stream))  # fmt: skip
    assert reply.code == OK, reply  # type: ignore[attr-defined]
    messages = tuple(
        rs.PublishedMessage(publishing_id=first_id + i, data=b) for i, b in enumerate(bodies)
    )
    await wire.send(rs.Publish(publisher_id=7, messages=messages))
    confirm = await wire.expect(rs.PublishConfirm)
    assert sorted(confirm.publishing_ids) == [m.publishing_id for m in messages]
    reply = await wire.call(rs.DeletePublisher(correlation_id=wire.corr(), publisher_id=7))
    assert reply.code == OK, reply  # type: ignore[attr-defined]


async def stats(wire: RabbitWire, stream: str) -> dict[str, int]:
    reply = await wire.call(rs.StreamStats(correlation_id=wire.corr(), stream=stream))
    assert isinstance(reply, rs.StreamStatsResponse) and reply.code == OK, reply
    return dict(reply.stats)


async def test_stream_stats_name_the_first_and_last_chunk(gateway: Running) -> None:
    with trio.fail_after(10):
        wire = await RabbitWire.connected(gateway)
        reply = await wire.call(rs.Create(correlation_id=wire.corr(), stream="st"))
        assert reply.code == OK  # type: ignore[attr-defined]
        assert await stats(wire, "st") == {
            "first_chunk_id": -1, "committed_chunk_id": -1, "last_chunk_id": -1,
        }  # fmt: skip
        await publish(wire, "st", [b"a", b"b"])  # one Publish frame = one chunk: 0..1
        await publish(wire, "st", [b"c", b"d", b"e"], first_id=3)  # 2..4
        assert await stats(wire, "st") == {
            "first_chunk_id": 0, "committed_chunk_id": 2, "last_chunk_id": 2,
        }  # fmt: skip
        missing = await wire.call(rs.StreamStats(correlation_id=wire.corr(), stream="nope"))
        assert missing.code == ResponseCode.STREAM_DOES_NOT_EXIST  # type: ignore[attr-defined]
        await wire.aclose()


async def test_command_versions_and_deliver_v2(gateway: Running) -> None:
    with trio.fail_after(10):
        wire = await RabbitWire.connected(gateway)
        reply = await wire.call(rs.ExchangeCommandVersions(
            correlation_id=wire.corr(),
            versions=(rs.CommandVersion(key=Key.DELIVER, min_version=1, max_version=2),),
        ))  # fmt: skip
        assert isinstance(reply, rs.ExchangeCommandVersionsResponse) and reply.code == OK
        versions = {v.key: (v.min_version, v.max_version) for v in reply.versions}
        # rstream reads the answer by position: DeclarePublisher first, then Publish.
        assert [v.key for v in reply.versions[:2]] == [Key.DECLARE_PUBLISHER, Key.PUBLISH]
        assert versions[Key.PUBLISH] == (1, 2) and versions[Key.DELIVER] == (1, 2)
        assert versions[Key.STREAM_STATS] == (1, 1)
        await wire.call(rs.Create(correlation_id=wire.corr(), stream="v2"))
        await publish(wire, "v2", [b"x", b"y"])
        reply = await wire.call(
            rs.Subscribe(
                correlation_id=wire.corr(),
                subscription_id=1,
                stream="v2",
                offset=OffsetSpec(type=1),
                credit=1,
            )
        )
        assert reply.code == OK  # type: ignore[attr-defined]
        deliver = await wire.expect(rs.Deliver)
        assert deliver.committed_chunk_id == 0  # v2, as negotiated
        assert delivered(deliver) == [(0, b"x"), (1, b"y")]
        assert len(decode_chunk(deliver.chunk).entries) == 2
        await wire.aclose()


async def test_super_stream_with_its_own_partition_names(gateway: Running) -> None:
    with trio.fail_after(10):
        wire = await RabbitWire.connected(gateway)
        reply = await wire.call(rs.CreateSuperStream(
            correlation_id=wire.corr(), name="orders", partitions=("orders-eu", "orders-us"),
            binding_keys=("eu", "us"), arguments=(("max-age", "7D"),),
        ))  # fmt: skip
        assert reply.code == OK, reply  # type: ignore[attr-defined]
        again = await wire.call(rs.Create(correlation_id=wire.corr(), stream="orders-us"))
        assert again.code == ResponseCode.STREAM_ALREADY_EXISTS  # type: ignore[attr-defined]
        parts = await wire.call(rs.Partitions(correlation_id=wire.corr(), super_stream="orders"))
        assert isinstance(parts, rs.PartitionsResponse)
        assert (parts.code, parts.streams) == (OK, ("orders-eu", "orders-us"))
        route = await wire.call(
            rs.Route(correlation_id=wire.corr(), routing_key="us", super_stream="orders")
        )
        assert isinstance(route, rs.RouteResponse) and route.streams == ("orders-us",)
        nowhere = await wire.call(
            rs.Route(correlation_id=wire.corr(), routing_key="asia", super_stream="orders")
        )
        assert isinstance(nowhere, rs.RouteResponse) and (nowhere.code, nowhere.streams) == (OK, ())
        await publish(wire, "orders-us", [b"u1"])
        meta = await wire.call(
            rs.Metadata(correlation_id=wire.corr(), streams=("orders-eu", "orders-us", "orders"))
        )
        assert isinstance(meta, rs.MetadataResponse)
        # The super stream's own name is not a stream (as on RabbitMQ).
        assert [s.code for s in meta.streams] == [OK, OK, ResponseCode.STREAM_DOES_NOT_EXIST]
        reply = await wire.call(rs.DeleteSuperStream(correlation_id=wire.corr(), name="orders"))
        assert reply.code == OK  # type: ignore[attr-defined]
        parts = await wire.call(rs.Partitions(correlation_id=wire.corr(), super_stream="orders"))
        assert parts.code == ResponseCode.STREAM_DOES_NOT_EXIST  # type: ignore[attr-defined]
        await wire.aclose()


async def test_a_kafka_topic_with_partitions_is_a_super_stream(gateway: Running) -> None:
    host, port = gateway.address("kafka")

    def create_topic() -> None:
        admin = AdminClient({"bootstrap.servers": f"{host}:{port}"})
        futures = admin.create_topics([NewTopic("kt", num_partitions=3)], operation_timeout=5)
        futures["kt"].result(timeout=10)

    with trio.fail_after(20):
        await trio.to_thread.run_sync(create_topic)
        wire = await RabbitWire.connected(gateway)
        parts = await wire.call(rs.Partitions(correlation_id=wire.corr(), super_stream="kt"))
        assert isinstance(parts, rs.PartitionsResponse)
        assert parts.streams == ("kt-0", "kt-1", "kt-2")
        route = await wire.call(
            rs.Route(correlation_id=wire.corr(), routing_key="2", super_stream="kt")
        )
        assert isinstance(route, rs.RouteResponse) and route.streams == ("kt-2",)
        await publish(wire, "kt-1", [b"p1"])
        reply = await wire.call(
            rs.Subscribe(
                correlation_id=wire.corr(),
                subscription_id=1,
                stream="kt-1",
                offset=OffsetSpec(type=1),
                credit=1,
            )
        )
        assert reply.code == OK  # type: ignore[attr-defined]
        assert delivered(await wire.expect(rs.Deliver)) == [(0, b"p1")]
        await wire.aclose()


async def test_an_answer_after_subscribe_or_credit_comes_behind_their_chunks(
    gateway: Running,
) -> None:
    """RabbitMQ sends what a Subscribe's (or a new Credit's) credit allows of what is there
    before it answers the next request, so clients (the RabbitMQ backend's reads, rstream's
    offset probes) take that answer as a barrier. Here the Subscribe (then a Credit) and a
    QueryOffset go out in one write: the messages there must come before the answer."""
    with trio.fail_after(20):
        wire = await RabbitWire.connected(gateway)
        reply = await wire.call(rs.Create(correlation_id=wire.corr(), stream="barrier"))
        assert reply.code == OK  # type: ignore[attr-defined]
        for i in range(12):
            await publish(wire, "barrier", [b"m%d" % i], first_id=i + 1)

        async def before_the_answer(*frames: rs.Frame) -> list[bytes]:
            """The messages delivered after sending ``frames`` in one write, until the
            QueryOffset's answer."""
            await wire.send_raw(b"".join(wire.codec.send(f) for f in frames))
            got: list[bytes] = []
            while True:
                frame = await wire.next_frame()
                assert frame is not None
                if isinstance(frame, rs.QueryOffsetResponse):
                    return got
                if isinstance(frame, rs.Deliver):
                    got += [body for _, body in delivered(frame)]

        def query() -> rs.QueryOffset:
            return rs.QueryOffset(correlation_id=wire.corr(), reference="r", stream="barrier")

        subscribe = rs.Subscribe(correlation_id=wire.corr(), subscription_id=1, stream="barrier",
                                 offset=OffsetSpec.offset(0), credit=1)  # fmt: skip
        assert await before_the_answer(subscribe, query()) == [b"m%d" % i for i in range(12)]
        # its one credit spent: what comes now waits for the next Credit
        for i in range(12, 15):
            await publish(wire, "barrier", [b"m%d" % i], first_id=i + 1)
        credit = rs.Credit(subscription_id=1, credit=1)
        assert await before_the_answer(credit, query()) == [b"m12", b"m13", b"m14"]
        await wire.aclose()
