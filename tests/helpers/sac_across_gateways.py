"""RabbitMQ Stream single active consumer across two real gateways on one backend (issue 14):
an rstream 1.1.1 consumer with the same name through each; exactly one is active and receives;
when its gateway is SIGKILLed, the other is activated once the session timeout passes and goes
on after the offset the first one stored. Run on Tansu and on RabbitMQ by their test modules.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import signal
from pathlib import Path
from typing import Any

import trio
from rstream import Consumer, EventContext

from gateway.listeners.rabbitmq_stream.sac import SESSION_TIMEOUT_MS
from tests.gateway.listeners.rabbitmq_stream.rstream_support import (
    Inbox,
    bodies,
    first,
    publish,
    resume_from_stored,
)
from tests.helpers.gateways import Gateway, running_gateways
from tests.helpers.rstream_direct import in_asyncio

SAC = {"single-active-consumer": "true", "name": "billing"}
LIMIT_S = 90.0


def payloads(inbox: Inbox) -> list[bytes]:
    """The bodies as published: on the Kafka backend the gateway hands rstream (which does not
    decode) the message as AMQP 1.0, its one data section (``0x00 0x53 0x75``, vbin8) last."""
    out = []
    for body in inbox.bodies:
        at = body.rfind(b"\x00Su\xa0")
        out.append(body if at < 0 else body[at + 5 : at + 5 + body[at + 4]])
    return out


def port_of(gateway: Gateway) -> int:
    return gateway.port("rabbitmq_stream")


async def one_active_consumer_across_two_gateways(url: str, tmp_path: Path) -> None:
    """The scenario; the caller filters rstream's unraisable warnings (see its test)."""
    events: list[tuple[str, bool]] = []

    def seen(who: str) -> Any:
        def on_event(active: bool, ctx: EventContext) -> None:
            events.append((who, active))

        return resume_from_stored(on_event)

    async with running_gateways(url, tmp_path, 2) as (a, b):
        inbox_a, inbox_b = Inbox(), Inbox()

        async def scenario() -> None:  # one asyncio loop: rstream's clients live in it
            await publish(port_of(a), "orders", bodies("m", 10), create=True)
            via_a = Consumer(host="127.0.0.1", port=port_of(a), username="guest", password="guest")
            await via_a.subscribe(
                "orders", inbox_a, properties=SAC, offset_specification=first(),
                consumer_update_listener=seen("a"),
            )  # fmt: skip
            await inbox_a.until(10, limit_s=30)  # a joined first: active
            await via_a.store_offset("orders", "billing", inbox_a.offsets[-1])
            via_b = Consumer(host="127.0.0.1", port=port_of(b), username="guest", password="guest")
            await via_b.subscribe(
                "orders", inbox_b, properties=SAC, offset_specification=first(),
                consumer_update_listener=seen("b"),
            )  # fmt: skip
            await publish(port_of(b), "orders", bodies("m", 5, start=10))
            await inbox_a.until(15, limit_s=30)
            await via_a.store_offset("orders", "billing", inbox_a.offsets[-1])
            # b stays inactive while a lives, through the rebalance its joining made.
            await asyncio.sleep(3)
            assert inbox_b.items == [] and ("b", True) not in events
            os.kill(a.pid, signal.SIGKILL)  # by pid: the gateway this test started
            await publish(port_of(b), "orders", bodies("m", 5, start=15))
            await inbox_b.until(5, limit_s=SESSION_TIMEOUT_MS / 1000 + 20)
            await via_b.close()
            with contextlib.suppress(Exception):  # its gateway is gone: what can be closed
                await asyncio.wait_for(via_a.close(), 5)

        with trio.fail_after(LIMIT_S):
            await in_asyncio(scenario, limit_s=80)
    # By body: a RabbitMQ stream's offsets also count its offset-tracking entries.
    assert payloads(inbox_a) == bodies("m", 15), (inbox_a, events)
    assert payloads(inbox_b) == bodies("m", 5, start=15), (inbox_b, events)
    assert ("a", True) in events and ("b", True) in events
    gc.collect()  # rstream's leaked objects go now, inside this test's filter
