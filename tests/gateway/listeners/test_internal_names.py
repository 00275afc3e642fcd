"""What the gateways keep for themselves on a shared backend (``__streamgate*``: the RabbitMQ
backend's catalog, the coordination log, Iggy group definitions, single-active-consumer groups)
stays out of every listing (issue 19): made here in the backend directly, as a gateway makes
them, they are never listed to a real client (confluent-kafka Metadata, apache-iggy streams and
topics). By name they are reachable, as Kafka's internal topics are: a gateway chained in front
of this one keeps its own internal streams and topics here through these listeners."""

from __future__ import annotations

from apache_iggy import IggyClient
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from gateway.app import Running
from gateway.model import CreateStream, CreateTopic, Topic
from tests.gateway.listeners.iggy.conftest import Clients, in_thread, run_iggy

INTERNAL = Topic("default", "__streamgate_catalog")
INTERNAL_STREAM = "__streamgate"


async def _made_internally(gateway: Running) -> None:
    assert gateway.backend is not None
    await gateway.backend.create_topic(CreateTopic(topic=INTERNAL, partitions=1))
    await gateway.backend.create_stream(CreateStream(stream=INTERNAL_STREAM))
    groups = Topic(INTERNAL_STREAM, "iggy-groups")
    await gateway.backend.create_topic(CreateTopic(topic=groups, partitions=1))


async def test_kafka_metadata_does_not_list_internal_topics(gateway: Running) -> None:
    await _made_internally(gateway)
    host, port = gateway.address("kafka")
    servers = f"{host}:{port}"

    def work() -> None:
        admin = AdminClient({"bootstrap.servers": servers})
        admin.create_topics([NewTopic("visible", 1)])["visible"].result(15)
        topics = set(admin.list_topics(timeout=10).topics)
        assert "visible" in topics and INTERNAL.name not in topics
        # asked for by name (as a chained gateway's Kafka backend asks): there
        named = admin.list_topics(INTERNAL.name, timeout=10).topics[INTERNAL.name]
        assert named.error is None and len(named.partitions) == 1

    await in_thread(work, limit_s=45)


async def test_iggy_listings_do_not_show_internal_streams(gateway: Running) -> None:
    await _made_internally(gateway)

    async def scenario(clients: Clients) -> None:
        root: IggyClient = await clients.connect()
        assert INTERNAL_STREAM not in {s.name for s in await root.get_streams()}
        default = await root.get_stream("default")
        assert default is not None
        assert INTERNAL.name not in {t.name for t in default.topics}
        # by name: a chained gateway's Iggy backend finds its own stream and topic
        own = await root.get_stream(INTERNAL_STREAM)
        assert own is not None and [t.name for t in own.topics] == ["iggy-groups"]
        assert await root.get_topic("default", INTERNAL.name) is not None

    await run_iggy(gateway, scenario)
