"""The RabbitMQ backend's catalog (gateway/backends/rabbitmq_stream/catalog.py): names, and the
state its JSON records build. Pure: no broker."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.backends.rabbitmq_stream.catalog import (
    CATALOG_STREAM,
    Catalog,
    TopicEntry,
    base_name,
    check_rabbit_name,
    config_json,
    config_of,
    partition_name,
)
from gateway.model import (
    InvalidRequest,
    Topic,
    TopicConfig,
    TopicExists,
    UnknownStream,
    UnknownTopic,
)


def apply(catalog: Catalog, **record: Any) -> str | None:
    return catalog.apply_entry(json.dumps(record).encode())


def topic_record(stream: str, name: str, tid: int, uid: str, parts: list[str]) -> dict[str, Any]:
    entry = TopicEntry(stream=stream, name=name, id=tid, uid=uid, partitions=parts,
                       starts=[0] * len(parts), base=parts[0])  # fmt: skip
    return entry.record(uid)


def test_names() -> None:
    assert base_name("default", "orders") == "orders"
    assert base_name("shop", "orders") == "shop.orders"
    assert [partition_name("orders", i, 1) for i in range(1)] == ["orders"]
    assert [partition_name("orders", i, 3) for i in range(3)] == [
        "orders-0",
        "orders-1",
        "orders-2",
    ]
    assert check_rabbit_name("x" * 255) == "x" * 255
    with pytest.raises(InvalidRequest):
        check_rabbit_name("é" * 128)  # 256 bytes
    with pytest.raises(InvalidRequest):
        check_rabbit_name(CATALOG_STREAM)


def test_config_round_trips() -> None:
    config = TopicConfig(retention_ms=60_000, max_message_bytes=10, extra={"a": "b"})
    assert config_of(json.loads(json.dumps(config_json(config)))) == config
    assert config_json(TopicConfig()) == {}


def test_streams_and_topics_from_records() -> None:
    catalog = Catalog()
    assert catalog.stream("default").name == "default"  # always there for lookups
    with pytest.raises(UnknownStream):
        catalog.stream("shop")
    assert apply(catalog, op="stream", name="shop", id=3, ts=5, rid="r1") == "r1"
    apply(catalog, **topic_record("shop", "orders", 0, "u1", ["shop.orders-0", "shop.orders-1"]))
    entry = catalog.topic(Topic("shop", "orders"))
    assert (entry.id, entry.partitions, entry.base) == (
        0,
        ["shop.orders-0", "shop.orders-1"],
        "shop.orders-0",
    )
    assert catalog.owners["shop.orders-1"] is entry
    with pytest.raises(TopicExists):
        catalog.check_free(["shop.orders-1"])
    catalog.check_free(["shop.orders-1"], entry)  # its own
    assert catalog.free_topic_id("shop", None) == 1 and catalog.free_topic_id("shop", 0) is None
    assert catalog.free_stream_id(None) == 4
    # A rewrite of the same topic (uid): renamed, and the old name forgotten.
    apply(catalog, **{**topic_record("shop", "sales", 0, "u1", ["shop.orders-0"])})
    with pytest.raises(UnknownTopic):
        catalog.topic(Topic("shop", "orders"))
    assert catalog.topic(Topic("shop", "sales")).partitions == ["shop.orders-0"]
    assert "shop.orders-1" not in catalog.owners
    apply(catalog, op="stream-rename", name="shop", new="store")
    assert catalog.topic(Topic("store", "sales")).stream == "store"
    apply(catalog, op="stream-delete", name="store")
    assert catalog.topics == {} and catalog.owners == {}


def test_offsets_groups_and_deletion() -> None:
    catalog = Catalog()
    apply(catalog, **topic_record("default", "t", 0, "u1", ["t"]))
    apply(catalog, op="offset", uid="u1", partition=0, group="g", zero=True, metadata="m")
    apply(catalog, op="group", stream="default", group="g")
    assert catalog.offset_meta("u1", 0, "g") == (True, "m")
    assert catalog.offset_meta("u1", 0, "h") == (False, "")
    assert catalog.groups == {("default", "g")}
    apply(catalog, op="topic-delete", stream="default", id=0)
    assert catalog.offsets == {}
    apply(catalog, **topic_record("default", "t", 0, "u2", ["t"]))  # made again: no offsets
    assert catalog.offset_meta("u2", 0, "g") == (False, "")


def test_the_first_create_of_a_name_or_an_id_wins() -> None:
    """Two gateways created the same topic at once: every gateway, replaying the log in its
    order, keeps the first record; the later one (same name, or a new name on the same id) is
    not applied, so its writer finds its topic missing."""
    catalog = Catalog()
    apply(catalog, **topic_record("default", "t", 0, "u1", ["t"]))
    apply(catalog, **topic_record("default", "t", 1, "u2", ["t-0", "t-1"]))
    assert catalog.topic(Topic("default", "t")).uid == "u1"
    assert set(catalog.owners) == {"t"}
    apply(catalog, **topic_record("default", "other", 0, "u3", ["other"]))
    assert ("default", "other") not in catalog.topics
    # A rewrite of the same topic (its uid) is not a create: renamed, it goes on.
    renamed = topic_record("default", "t2", 0, "u1", ["t"])
    apply(catalog, **renamed)
    assert catalog.topic(Topic("default", "t2")).uid == "u1"
    assert ("default", "t") not in catalog.topics


@pytest.mark.parametrize(
    "data", [b"not json", b"[1]", b'{"op": "nope"}', b'{"op": "topic"}', b'{"rid": "x"}']
)
def test_bad_records_are_skipped(data: bytes) -> None:
    catalog = Catalog()
    assert catalog.apply_entry(data) is None
    assert catalog.topics == {} and catalog.streams == {}
