"""RabbitMQ Stream single active consumer across gateways (issue 14): two real ``streamgate run``
processes on one Kafka broker (a real Tansu), an rstream 1.1.1 consumer with the same name
through each. The broker's group decides: exactly one is active and receives; when its gateway
is SIGKILLed, the other is activated once the broker's session timeout passes and goes on after
the offset the first one stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import signal
from pathlib import Path
from typing import Any

import pytest
import trio
from rstream import Consumer, EventContext

from gateway.listeners.rabbitmq_stream.sac import SESSION_TIMEOUT_MS, choose
from gateway.model import MemberInfo
from tests.gateway.listeners.rabbitmq_stream.rstream_support import (
    Inbox,
    bodies,
    first,
    publish,
    resume_from_stored,
)
from tests.helpers.gateways import Gateway, running_gateways
from tests.helpers.rstream_direct import in_asyncio
from tests.helpers.tansu import Tansu

SAC = {"single-active-consumer": "true", "name": "billing"}
LIMIT_S = 90.0


def port_of(gateway: Gateway) -> int:
    return gateway.port("rabbitmq_stream")


def test_the_leader_picks_the_first_joined_or_the_partitions_member() -> None:
    def member(name: str, joined_ns: int) -> MemberInfo:
        return MemberInfo(member_id=name, metadata=joined_ns.to_bytes(8, "big"))

    members = (member("late", 30), member("early", 10), member("middle", 20))
    assert choose(members, 0, super_stream=False) == "early"
    assert choose(members, 5, super_stream=False) == "early"
    assert [choose(members, p, super_stream=True) for p in range(4)] == [
        "early", "middle", "late", "early",
    ]  # fmt: skip


# rstream 1.1.1 leaves the socket and StreamWriter of a connection whose server died open (its
# reader task ends without closing them): unraisable ResourceWarnings of the library's,
# collected at garbage collection.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
async def test_one_active_consumer_across_two_gateways(tansu: Tansu, tmp_path: Path) -> None:
    events: list[tuple[str, bool]] = []

    def seen(who: str) -> Any:
        def on_event(active: bool, ctx: EventContext) -> None:
            events.append((who, active))

        return resume_from_stored(on_event)

    async with running_gateways(tansu.url, tmp_path, 2) as (a, b):
        inbox_a, inbox_b = Inbox(), Inbox()

        async def scenario() -> None:  # one asyncio loop: rstream's clients live in it
            await publish(port_of(a), "orders", bodies("m", 10), create=True)
            via_a = Consumer(host="127.0.0.1", port=port_of(a), username="guest", password="guest")
            await via_a.subscribe(
                "orders", inbox_a, properties=SAC, offset_specification=first(),
                consumer_update_listener=seen("a"),
            )  # fmt: skip
            await inbox_a.until(10, limit_s=30)  # a joined first: active
            await via_a.store_offset("orders", "billing", 9)
            via_b = Consumer(host="127.0.0.1", port=port_of(b), username="guest", password="guest")
            await via_b.subscribe(
                "orders", inbox_b, properties=SAC, offset_specification=first(),
                consumer_update_listener=seen("b"),
            )  # fmt: skip
            await publish(port_of(b), "orders", bodies("m", 5, start=10))
            await inbox_a.until(15, limit_s=30)
            await via_a.store_offset("orders", "billing", 14)
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
    assert inbox_a.offsets == list(range(15))
    assert inbox_b.offsets == list(range(15, 20))  # after the offset a stored
    assert ("a", True) in events and ("b", True) in events
    gc.collect()  # rstream's leaked objects go now, inside this test's filter
