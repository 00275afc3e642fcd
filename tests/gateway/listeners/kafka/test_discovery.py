"""Metadata and FindCoordinator carry the gateway's advertised address, never a backend's; the
broker's DescribeConfigs says where ``advertised.listeners`` came from."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio
from kio.index import load_request_schema

from gateway.app import Running
from protocols.kafka.build import build
from protocols.kafka.framing import KafkaClientCodec, KafkaResponse
from tests.conftest import gateway_config, start_gateway


async def _ask(host: str, port: int, *bodies: Any) -> list[Any]:
    codec = KafkaClientCodec("discovery-test")
    out = []
    with trio.fail_after(10):
        stream = await trio.open_tcp_stream(host, port)
        async with stream:
            for body in bodies:
                await stream.send_all(codec.send(body)[1])
                while not isinstance(response := codec.next_response(), KafkaResponse):
                    data = await stream.receive_some(65536)
                    assert data, "connection closed"
                    codec.receive_data(data)
                out.append(response.body)
    return out


def _discovery() -> tuple[Any, Any]:
    return (
        build(load_request_schema(3, 5), {"topics": [], "allow_auto_topic_creation": False}),
        build(load_request_schema(10, 2), {"key": "some-group", "key_type": 0}),
    )


async def test_default_is_the_address_the_client_connected_to(gateway: Running) -> None:
    host, port = gateway.address("kafka")
    metadata, coordinator = await _ask(host, port, *_discovery())
    assert [(b.node_id, b.host, b.port) for b in metadata.brokers] == [(1, host, port)]
    assert metadata.controller_id == 1
    assert (coordinator.node_id, coordinator.host, coordinator.port) == (1, host, port)


@pytest.fixture
async def advertised(tmp_path: Path, nursery: trio.Nursery) -> AsyncIterator[Running]:
    config = gateway_config(
        tmp_path / "data",
        **{"listeners.kafka.advertised_host": "kafka.example.internal",
           "listeners.kafka.advertised_port": 19092},
    )  # fmt: skip
    running = await start_gateway(nursery, config)
    yield running


async def test_configured_advertised_address(advertised: Running) -> None:
    host, port = advertised.address("kafka")
    metadata, coordinator = await _ask(host, port, *_discovery())
    assert [(b.host, b.port) for b in metadata.brokers] == [("kafka.example.internal", 19092)]
    assert (coordinator.host, coordinator.port) == ("kafka.example.internal", 19092)


async def test_configured_advertised_listeners_are_static(advertised: Running) -> None:
    """Configured, ``advertised.listeners`` is STATIC_BROKER_CONFIG (4), as from a Kafka broker's
    server.properties; unconfigured it is DEFAULT_CONFIG (test_broker_answers). Asked on the wire:
    a client would follow the advertised address, which resolves nowhere."""
    host, port = advertised.address("kafka")
    request = build(
        load_request_schema(32, 3),
        {"resources": [{"resource_type": 4, "resource_name": "1",
                        "configuration_keys": ["advertised.listeners", "broker.id"]}],
         "include_synonyms": False, "include_documentation": False},
    )  # fmt: skip
    (answer,) = await _ask(host, port, request)
    entries = {c.name: c for c in answer.results[0].configs}
    listeners = entries["advertised.listeners"]
    assert listeners.value == "PLAINTEXT://kafka.example.internal:19092"
    assert (listeners.config_source, listeners.config_type, listeners.read_only) == (4, 2, False)
    assert (entries["broker.id"].config_type, entries["broker.id"].read_only) == (3, True)
    assert listeners.documentation is None
