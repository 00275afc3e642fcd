"""``streamgate bench rabbitmq-stream`` on a few messages against the in-process gateway: every
message confirmed and consumed back (counts only; the timings are the bench's business)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

import pytest
import trio

from gateway.app import Running
from gateway.bench.rabbitmq_stream import bench_rabbitmq_stream
from gateway.cli import main

T = TypeVar("T")


async def in_thread(fn: Callable[[], T]) -> T:
    """The bench runs its own asyncio loop: in a worker thread while trio serves the gateway."""
    with trio.fail_after(60):
        return await trio.to_thread.run_sync(fn, abandon_on_cancel=True)


def address(gateway: Running) -> str:
    host, port = gateway.address("rabbitmq_stream")
    return f"{host}:{port}"


@pytest.mark.parametrize("kind", ["amqp", "raw"])
async def test_every_message_is_confirmed_and_consumed(gateway: Running, kind: str) -> None:
    # 2,500 in batches of 1,000 with 2 in flight: the window waits, and the last batch is short.
    run = functools.partial(
        bench_rabbitmq_stream, address(gateway), message_size=100, kind=kind, batch=1000,
        in_flight=2, messages=2500,
    )  # fmt: skip
    result = await in_thread(run)
    assert (result.kind, result.batch, result.in_flight) == (kind, 1000, 2)
    assert result.messages == result.confirmed == result.consumed == 2500
    assert f"x 2500 {kind}" in result.format()


async def test_the_cpu_is_sampled_around_publishing_and_consuming(gateway: Running) -> None:
    """``cpu`` is read four times: before and after publishing, before and after consuming
    (the connections and the stream made and deleted are left out, as bench_kafka does); each
    phase's figure is what it read after minus before."""
    reads: list[float] = []

    def cpu() -> float:
        reads.append(len(reads) ** 2)  # 0, 1, 4, 9: each difference tells its pair
        return reads[-1]

    run = functools.partial(bench_rabbitmq_stream, address(gateway), message_size=100,
                            messages=1500, cpu=cpu)  # fmt: skip
    result = await in_thread(run)
    assert reads == [0, 1, 4, 9]
    assert (result.publish_cpu_s, result.consume_cpu_s) == (1, 5)
    assert result.confirmed == result.consumed == 1500


async def test_cli_prints_one_line_per_size_and_kind(
    gateway: Running, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "bench", "rabbitmq-stream", "--address", address(gateway), "--sizes", "10,2000",
        "--kinds", "amqp,raw", "--messages", "300", "--batch", "128", "--in-flight", "1",
    ]  # fmt: skip
    assert await in_thread(lambda: main(argv)) == 0
    out = capsys.readouterr().out.splitlines()  # the in-process gateway logs there too
    lines = [line for line in out if line.startswith("rabbitmq-stream ")]
    assert [line.split()[1:5] for line in lines] == [
        ["10", "B", "x", "300"], ["10", "B", "x", "300"],
        ["2000", "B", "x", "300"], ["2000", "B", "x", "300"],
    ]  # fmt: skip
    assert [line.split()[5] for line in lines] == ["amqp", "raw", "amqp", "raw"]


def test_a_batch_larger_than_a_frame_is_refused() -> None:
    with pytest.raises(ValueError, match="exceed one"):
        bench_rabbitmq_stream("127.0.0.1:1", message_size=1024, batch=2000)
    with pytest.raises(ValueError, match="kind"):
        bench_rabbitmq_stream("127.0.0.1:1", message_size=100, kind="json")
