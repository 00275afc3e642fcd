"""What the gateways keep for themselves on a shared backend (``__streamgate*``: the RabbitMQ
backend's catalog, the coordination log, Iggy group definitions, single-active-consumer groups)
stays internal (issue 19): made here in the backend directly, as a gateway makes them, it is
never listed to a real client (confluent-kafka Metadata, apache-iggy streams and topics) and no
client reaches it by name, makes it or renames something into it."""

from __future__ import annotations

import pytest
from apache_iggy import IggyClient, SendMessage
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from gateway.app import Running
from gateway.model import CreateStream, CreateTopic, ListTopics, Topic
from tests.gateway.listeners.iggy.conftest import Clients, in_thread, run_iggy

INTERNAL = Topic("default", "__streamgate_catalog")


async def _made_internally(gateway: Running) -> None:
    assert gateway.backend is not None
    await gateway.backend.create_topic(CreateTopic(topic=INTERNAL, partitions=1))
    await gateway.backend.create_stream(CreateStream(stream="__streamgate"))


async def test_kafka_clients_neither_see_nor_reach_internal_topics(gateway: Running) -> None:
    await _made_internally(gateway)
    host, port = gateway.address("kafka")
    servers = f"{host}:{port}"

    def work() -> None:
        admin = AdminClient({"bootstrap.servers": servers})
        admin.create_topics([NewTopic("visible", 1)])["visible"].result(15)
        topics = set(admin.list_topics(timeout=10).topics)
        assert "visible" in topics and INTERNAL.name not in topics
        made = admin.create_topics([NewTopic("__streamgate_mine", 1)])["__streamgate_mine"]
        with pytest.raises(KafkaException) as refused:
            made.result(15)
        assert refused.value.args[0].code() == KafkaError.INVALID_REQUEST
        errors: list[KafkaError | None] = []
        p = Producer({"bootstrap.servers": servers, "message.timeout.ms": 3000,
                      "allow.auto.create.topics": False})  # fmt: skip
        p.produce(INTERNAL.name, b"injected", on_delivery=lambda e, m: errors.append(e))
        p.flush(10)
        assert errors and errors[0] is not None, errors

    await in_thread(work, limit_s=45)


async def test_iggy_clients_neither_see_nor_reach_internal_streams(gateway: Running) -> None:
    await _made_internally(gateway)

    async def scenario(clients: Clients) -> None:
        root: IggyClient = await clients.connect()
        names = {s.name for s in await root.get_streams()}
        assert "__streamgate" not in names
        default = await root.get_stream("default")
        assert default is not None
        assert INTERNAL.name not in {t.name for t in default.topics}
        with pytest.raises(RuntimeError):
            await root.send_messages("default", INTERNAL.name, 0, [SendMessage(b"injected")])
        with pytest.raises(RuntimeError):
            await root.create_stream("__streamgate_mine")

    await run_iggy(gateway, scenario)
    # nothing got in
    assert gateway.backend is not None
    info = (await gateway.backend.list_topics(ListTopics(stream="default"))).topics
    assert [t.partitions[0].next_offset for t in info if t.topic == INTERNAL] == [0]
