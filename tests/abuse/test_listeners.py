"""Issue 18's fuzz and abuse flood, per listener, against a real ``streamgate run`` on the
embedded backend: random, mutated, oversized and truncated frames, before and after a login,
from WORKERS connections at once for FUZZ_S seconds, while a confluent-kafka producer
(SASL, acks=all) keeps producing as a canary.

Afterwards: the gateway is alive, every fuzz connection was answered or closed in time, the
canary was never left without an acknowledgement for CANARY_GAP_S, RSS grew by less than
RSS_GROWTH_MB, no connection ended as ``internal`` and the log holds no traceback, and the
listener's real client still does a whole produce and consume round trip.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import trio
from rstream import RawMessage

from protocols.iggy import (
    CreateStream,
    CreateTopic,
    Framing,
    IggyClientCodec,
    Message,
    PartitionId,
    SendMessages,
)
from protocols.rog import FetchOk, Ok
from tests.abuse.corpus import Target
from tests.abuse.harness import (
    CANARY_GAP_S,
    FUZZ_VARIABLES,
    GATEWAY_SETTINGS,
    LOG_ALARMS,
    RSS_GROWTH_MB,
    SASL,
    Report,
    flood,
    fuzz_seconds,
    fuzz_seed,
    kafka_canary,
    metric_samples,
    rss_mb,
    run_in_thread,
    watch,
)
from tests.helpers.gateways import Gateway, running_gateway
from tests.helpers.iggy_wire import IggyWire, login_command
from tests.helpers.kafka_roundtrip import round_trip
from tests.helpers.producers import Acked
from tests.helpers.rog_client import RogClient
from tests.helpers.rstream_direct import in_asyncio, publish_direct, read_direct

FUZZ_S = fuzz_seconds()
ROUND_TRIP_S = 60.0
# start, canary, the flood, its slowest connections, the round trip: bounded as a whole
TEST_S = 30.0 + FUZZ_S + 20.0 + ROUND_TRIP_S
VALUES = [b"after-the-flood-%d" % i for i in range(5)]


# --- each protocol's round trip --------------------------------------------------------------


async def kafka_round_trip(gw: Gateway) -> None:
    conf = {"bootstrap.servers": gw.kafka, **SASL}
    got = await run_in_thread(round_trip, conf, "abuse-round-trip", VALUES)
    assert got == VALUES


async def rabbit_round_trip(gw: Gateway) -> None:
    host, port = gw.addresses["rabbitmq_stream"].rsplit(":", 1)
    where = {"host": host, "port": int(port), "username": "guest", "password": "guest"}
    stream = "abuse-round-trip"
    await in_asyncio(lambda: publish_direct(where, stream, [RawMessage(v) for v in VALUES]))
    got = await in_asyncio(lambda: read_direct(where, stream, len(VALUES)))
    assert [bytes(body) for _, body, _ in got] == VALUES


async def iggy_round_trip(gw: Gateway, target: Target) -> None:
    era = target.iggy_era
    host, port = gw.addresses["iggy"].rsplit(":", 1)
    stream = await trio.open_tcp_stream(host, int(port))
    framing = Framing.VSR if target is Target.IGGY_VSR else Framing.LEGACY
    wire = IggyWire(stream, IggyClientCodec(framing, era=era))
    try:
        await wire.ok(login_command(era))
        name = f"abuse-{target.value}"
        await wire.ok(CreateStream(name=name))
        await wire.ok(CreateTopic(stream_id=name, name="t", partitions_count=1))
        messages = tuple(Message(id=i + 1, payload=v) for i, v in enumerate(VALUES))
        await wire.ok(
            SendMessages(
                stream_id=name, topic_id="t", partitioning=PartitionId(id=0), messages=messages
            )
        )
        polled = await wire.poll(name, "t", 0)
        assert [m.payload for m in polled.messages] == VALUES
    finally:
        await wire.aclose()


async def rog_round_trip(gw: Gateway) -> None:
    host, port = gw.addresses["rog"].rsplit(":", 1)
    client = RogClient(host, int(port))
    assert await client.create_log("abuse-round-trip", 1) == Ok()
    for value in VALUES:
        assert await client.publish("abuse-round-trip", 0, value) == Ok()
    got = []
    for _ in VALUES:
        reply = await client.fetch("abuse-round-trip", 0, "g")
        assert isinstance(reply, FetchOk), reply
        got.append(reply.data)
        assert await client.ack("abuse-round-trip", 0, "g") == Ok()
    assert got == VALUES


async def served(gw: Gateway, target: Target) -> None:
    match target:
        case Target.KAFKA:
            await kafka_round_trip(gw)
        case Target.RABBITMQ_STREAM:
            await rabbit_round_trip(gw)
        case Target.IGGY_VSR | Target.IGGY_LEGACY:
            await iggy_round_trip(gw, target)
        case Target.ROG:
            await rog_round_trip(gw)


# --- the flood -------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(TEST_S + 30)
@pytest.mark.parametrize("target", list(Target), ids=[t.value for t in Target])
async def test_a_fuzz_flood_leaves_the_gateway_serving(
    tmp_path: Path, target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed = fuzz_seed()
    # The gateway takes every STREAMGATE_* variable for a setting and refuses unknown ones.
    for name in FUZZ_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    report = Report(target, seed)
    print(f"abuse flood: {report.reproduce()}, {FUZZ_S} s")  # shown with a failure
    args = [arg for setting in GATEWAY_SETTINGS for arg in ("--set", setting)]
    with trio.fail_after(TEST_S):
        async with running_gateway(f"embedded:{tmp_path / 'data'}", tmp_path, "abuse", *args) as gw:
            stop, acked = threading.Event(), Acked()
            canary = threading.Thread(target=kafka_canary, args=(gw.kafka, stop, acked))
            canary.start()
            try:
                with trio.fail_after(20):
                    while acked.count < 10:
                        assert not acked.failure, acked.failure
                        await trio.sleep(0.05)
                report.baseline_mb = report.peak_mb = rss_mb(gw.pid)
                before = acked.count
                done = trio.Event()
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(watch, gw, acked, report, done)
                    await flood(gw, target, seed, FUZZ_S, report)
                    with trio.fail_after(ROUND_TRIP_S):
                        await served(gw, target)
                    done.set()
            finally:
                stop.set()
                await trio.to_thread.run_sync(canary.join, 15)
            print(report.summary())
            assert gw.process.returncode is None, f"{report.reproduce()}: the gateway exited"
            assert not acked.failure, f"{report.reproduce()}: canary: {acked.failure}"
            assert acked.count > before, report.summary()
            assert report.canary_gap_s < CANARY_GAP_S, report.summary()
            assert report.peak_mb < report.baseline_mb + RSS_GROWTH_MB, report.summary()
            assert not report.hangs, f"{report.reproduce()}: no answer, no close:\n" + "\n".join(
                report.hangs[:5]
            )
            assert not report.login_failures, (report.summary(), report.login_failures[:5])
            refused = {k: v for k, v in report.outcomes.items() if k.startswith("connect failed")}
            assert not refused, f"{report.reproduce()}: the listener refused connections {refused}"
            errors = await run_in_thread(metric_samples, gw, "streamgate_connection_errors")
            internal = {k: v for k, v in errors.items() if "internal" in k and v}
            assert not internal, f"{report.reproduce()}: {internal}"
            print("connection errors:", {k: v for k, v in errors.items() if v})
    log = gw.log_path.read_text(errors="replace")
    alarms = [line for line in log.splitlines() if any(a in line for a in LOG_ALARMS)]
    assert not alarms, f"{report.reproduce()}:\n" + "\n".join(alarms[:20]) + "\n" + gw.log()
