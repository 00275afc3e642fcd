"""``streamgate topics|produce|consume`` as real processes: on the embedded store directly, and
through a running gateway's own listeners with the Kafka, Iggy and RabbitMQ Stream backends."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.app import Running
from tests.helpers.client_cli import Ran, cli, json_lines
from tests.helpers.processes import free_ports

LINES = b"first\nsecond line\n\xc3\xa9t\xc3\xa9\nlast-without-newline"
VALUES = ["first", "second line", "\u00e9t\u00e9", "last-without-newline"]
HEADERS = [{"name": "trace", "value": "t-1"}, {"name": "tag", "value": "a=b"},
           {"name": "trace", "value": "t-2"}]  # fmt: skip


def _ok(ran: Ran) -> Ran:
    assert ran.code == 0, ran
    assert "Traceback" not in ran.err
    return ran


async def round_trip(url: str) -> None:
    """topics create -> produce lines with key and headers -> consume --format json gives them
    back in order -> topics list shows the topic -> delete -> gone."""
    at = ("--url", url)

    def until(count: int) -> tuple[str, ...]:
        return ("--count", str(count)) if count == 1 else ()

    created = _ok(await cli("topics", "create", "orders", "--partitions", "2", *at))
    assert created.lines == ["created topic 'orders' (2 partitions)"]

    produced = _ok(await cli(
        "produce", "orders", "--partition", "1", "--key", "user-7", "--header", "trace=t-1",
        "--header", "tag=a=b", "--header", "trace=t-2", *at, stdin=LINES,
    ))  # fmt: skip
    assert produced.lines == ["acknowledged 4 messages on 'orders' partition 1, offsets 0..3"]
    assert produced.err == ""  # stderr is no TTY: no progress line

    consumed = _ok(await cli("consume", "orders", "--format", "json", *until(4), *at))
    got = json_lines(consumed)
    assert [m["value"] for m in got] == VALUES
    assert [(m["partition"], m["offset"]) for m in got] == [(1, 0), (1, 1), (1, 2), (1, 3)]
    assert {m["key"] for m in got} == {"user-7"}
    assert all(m["headers"] == HEADERS for m in got)
    assert all(m["topic"] == "orders" and m["timestamp_us"] > 0 for m in got)

    one = _ok(await cli("consume", "orders", "--partition", "1", *until(1), *at))
    assert one.lines == ["first"]

    listed = _ok(await cli("topics", "list", *at))
    fields = [line.split("\t") for line in listed.lines]
    assert ["orders", "partitions=2"] in [f[:2] for f in fields]

    assert _ok(await cli("topics", "delete", "orders", *at)).lines == ["deleted topic 'orders'"]
    gone = await cli("consume", "orders", *at)
    assert gone.code == 1 and gone.out == ""
    assert gone.err.startswith("streamgate: ") and "does not exist" in gone.err
    assert "orders" not in _ok(await cli("topics", "list", *at)).out.split()


async def test_round_trip_on_the_embedded_store(tmp_path: Path) -> None:
    await round_trip(f"embedded:{tmp_path / 'data'}")


@pytest.mark.parametrize("protocol", ["kafka", "iggy", "rabbitmq_stream"])
async def test_round_trip_through_a_gateway(gateway: Running, protocol: str) -> None:
    host, port = gateway.address(protocol)
    if protocol == "kafka":
        await round_trip(f"kafka://{host}:{port}")
    elif protocol == "iggy":
        await round_trip(f"iggy://iggy:iggy@{host}:{port}")
    else:
        # The RabbitMQ backend learns a stream's bounds and reads through short subscriptions,
        # taking a QueryOffset answer as a barrier behind the Deliver frames they cause: the
        # listener keeps that order, as RabbitMQ does.
        await round_trip(f"rabbitmq-stream://guest:guest@{host}:{port}/%2F")


async def test_topic_errors_and_their_flags(tmp_path: Path) -> None:
    at = ("--url", f"embedded:{tmp_path / 'data'}")
    _ok(await cli("topics", "create", "t", "--retention-ms", "60000", *at))
    again = await cli("topics", "create", "t", *at)
    assert (again.code, again.err) == (1, "streamgate: topic 't' already exists\n")
    _ok(await cli("topics", "create", "t", "--if-not-exists", *at))
    listed = _ok(await cli("topics", "list", *at))
    assert listed.lines == ["t\tpartitions=1\tmessages=0\tretention.ms=60000"]

    _ok(await cli("topics", "delete", "t", *at))
    missing = await cli("topics", "delete", "t", *at)
    assert (missing.code, missing.err) == (1, "streamgate: topic 't' does not exist\n")
    _ok(await cli("topics", "delete", "t", "--if-exists", *at))

    other = _ok(await cli("topics", "create", "x", "--stream", "s1", *at))
    assert other.lines == ["created topic 's1/x' (1 partition)"]
    assert _ok(await cli("topics", "list", *at)).out == ""  # the default stream has none
    assert _ok(await cli("topics", "list", "--stream", "s1", *at)).lines[0].startswith("x\t")


async def test_missing_topic_and_partition_fail_with_a_message(tmp_path: Path) -> None:
    at = ("--url", f"embedded:{tmp_path / 'data'}")
    for ran in (await cli("produce", "nope", *at, stdin=b"x\n"), await cli("consume", "nope", *at)):
        assert (ran.code, ran.out) == (1, "")
        assert ran.err == "streamgate: topic 'nope' does not exist\n"
    _ok(await cli("topics", "create", "t", "--partitions", "2", *at))
    wrong = await cli("produce", "t", "--partition", "2", *at, stdin=b"x\n")
    assert (wrong.code, wrong.err) == (1, "streamgate: topic 't' has partitions 0..1, not 2\n")


async def test_bad_and_unreachable_urls(tmp_path: Path) -> None:
    bad = await cli("topics", "list", "--url", "nats://127.0.0.1:4222")
    assert bad.code == 1 and "Traceback" not in bad.err
    assert bad.err.startswith("streamgate: unknown backend URL scheme 'nats'")

    (port,) = free_ports(1)
    down = await cli("topics", "list", "--url", f"iggy://iggy:secret@127.0.0.1:{port}",
                     "--timeout", "1", limit_s=15)  # fmt: skip
    assert down.code == 1 and "Traceback" not in down.err
    assert down.err.startswith(f"streamgate: no answer from iggy://iggy:***@127.0.0.1:{port}"
                               " within 1 s")  # fmt: skip
    assert "secret" not in down.err
