"""Bad input on the RabbitMQ Stream listener, over raw sockets (rabbitmq-stream.md §4, §5, §7).

Before Open, anything but the handshake closes the socket without a word, as the real server
does; a refused authentication or virtual host is answered with its code first. After Open an
unknown or undecodable frame is answered with ``Close(0x0d)`` (0x0e for a frame over the
negotiated frame_max) and the connection ends after the client's CloseResponse. A refused command
(an unknown publisher or subscription id...) is answered with its §4 code and the connection goes
on. None of it disturbs anyone else.
"""

from __future__ import annotations

import gzip
import struct
import time

import pytest
import trio
from rstream import (
    AMQPMessage,
    Consumer,
    ConsumerOffsetSpecification,
    MessageContext,
    OffsetType,
    amqp_decoder,
)
from rstream import Producer as RsProducer

from gateway.app import Running
from protocols import rabbitmq_stream as rs
from protocols.rabbitmq_stream import Key, ResponseCode
from protocols.rabbitmq_stream.chunk import Compression, SubEntryBatch, decode_chunk
from tests.helpers.connections import connection_errors
from tests.helpers.rabbitmq_stream_wire import RabbitWire, delivered

from .conftest import eventually, rstream_kwargs, run_client

PROTOCOL = "rabbitmq_stream"
FRAME = struct.Struct(">IHH")  # size, key, version (§2)


def errors(running: Running, reason: str) -> float:
    return connection_errors(running, PROTOCOL, reason)


def frame(key: int, body: bytes, *, version: int = 1) -> bytes:
    """A frame by hand: the size counts key, version and body."""
    return FRAME.pack(4 + len(body), key, version) + body


def string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


async def create(wire: RabbitWire, stream: str) -> None:
    reply = await wire.call(rs.Create(correlation_id=wire.corr(), stream=stream))
    assert isinstance(reply, rs.CreateResponse) and reply.code == ResponseCode.OK, reply


async def declare(wire: RabbitWire, publisher_id: int, stream: str, reference: str = "") -> int:
    reply = await wire.call(
        rs.DeclarePublisher(
            correlation_id=wire.corr(),
            publisher_id=publisher_id,
            reference=reference,
            stream=stream,
        )
    )
    assert isinstance(reply, rs.DeclarePublisherResponse), reply
    return reply.code


def publish(publisher_id: int, *items: tuple[int, bytes]) -> rs.Publish:
    messages = tuple(rs.PublishedMessage(publishing_id=i, data=d) for i, d in items)
    return rs.Publish(publisher_id=publisher_id, messages=messages)


async def first_delivery(running: Running, stream: str) -> list[tuple[int, bytes]]:
    """What a new subscription from FIRST gets in its first Deliver."""
    wire = await RabbitWire.connected(running)
    first = rs.OffsetSpec(type=rs.OffsetType.FIRST)
    reply = await wire.call(
        rs.Subscribe(correlation_id=wire.corr(), subscription_id=0, stream=stream, offset=first,
                     credit=1)
    )  # fmt: skip
    assert isinstance(reply, rs.SubscribeResponse) and reply.code == ResponseCode.OK, reply
    got = delivered(await wire.expect(rs.Deliver))
    await wire.aclose()
    return got


async def refused_after_open(wire: RabbitWire, code: int) -> None:
    """The server's Close(code), our CloseResponse, then the end of the connection."""
    close = await wire.expect(rs.Close)
    assert close.code == code, close
    await wire.send(rs.CloseResponse(correlation_id=close.correlation_id, code=ResponseCode.OK))
    assert await wire.closed() == []


# --- before Open: closed without a frame (§7) ------------------------------------------------


GARBAGE = {
    "http": b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",  # "GET " is a size of 1.2 GB
    "tls": b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(40),
    "unknown-key": frame(0x7777, b"\x00\x00\x00\x01"),
    "server-frame": frame(Key.DELIVER, b"\x00" + bytes(48)),
    "unknown-version": frame(Key.PEER_PROPERTIES, b"\x00\x00\x00\x01\x00\x00\x00\x00", version=9),
    "short": struct.pack(">I", 3) + b"\x00\x11\x00",  # size 3: no room for key and version
    "bad-body": frame(Key.PEER_PROPERTIES, b"\x00\x00\x00\x01\x00\x00\x00\x05\x00\x01"),
}


@pytest.mark.parametrize("kind", list(GARBAGE))
async def test_garbage_before_the_handshake_is_closed_without_a_reply(
    gateway: Running, kind: str
) -> None:
    with trio.fail_after(10):
        wire = await RabbitWire.open(gateway)
        await wire.send_raw(GARBAGE[kind])
        assert await wire.closed() == []
        # A TLS ClientHello on this plaintext port is told apart and counted as a TLS failure.
        reasons = ("tls",) if kind == "tls" else ("protocol_error", "preauth_frame_too_large")
        assert sum(errors(gateway, r) for r in reasons) == 1
        assert errors(gateway, "internal") == 0


async def test_a_command_before_open_is_closed_without_a_reply(gateway: Running) -> None:
    create_frame = rs.Create(correlation_id=99, stream="too-early")
    with trio.fail_after(10):
        for steps in range(3):  # right away, after hello, after authentication and Tune
            wire = await RabbitWire.open(gateway)
            if steps >= 1:
                await wire.hello()
            if steps >= 2:
                assert (await wire.authenticate()).code == ResponseCode.OK
                await wire.tune(frame_max=1_048_576, heartbeat=0)
            await wire.send(create_frame)
            assert await wire.closed() == [], steps
        assert errors(gateway, "protocol_error") == 3
        wire = await RabbitWire.connected(gateway)  # nothing was created
        reply = await wire.call(rs.Metadata(correlation_id=wire.corr(), streams=("too-early",)))
        assert isinstance(reply, rs.MetadataResponse)
        assert reply.streams[0].code == ResponseCode.STREAM_DOES_NOT_EXIST
        await wire.aclose()


@pytest.mark.parametrize(
    ("user", "password", "mechanism", "code"),
    [
        ("guest", "wrong", "PLAIN", ResponseCode.AUTHENTICATION_FAILURE),
        ("nobody", "guest", "PLAIN", ResponseCode.AUTHENTICATION_FAILURE),
        ("guest", "guest", "AMQPLAIN", ResponseCode.SASL_MECHANISM_NOT_SUPPORTED),
        ("guest", "guest", "SCRAM-SHA-256", ResponseCode.SASL_MECHANISM_NOT_SUPPORTED),
    ],
)
async def test_refused_authentication_answers_its_code_then_closes(
    gateway: Running, user: str, password: str, mechanism: str, code: int
) -> None:
    with trio.fail_after(10):
        wire = await RabbitWire.open(gateway)
        await wire.hello()
        reply = await wire.authenticate(user, password, mechanism=mechanism)
        assert reply.code == code
        assert await wire.closed() == []  # no Tune, nothing else
        assert errors(gateway, "internal") == 0


@pytest.mark.parametrize("refusal", ["login", "vhost"])
async def test_a_refused_client_s_close_is_answered_before_the_socket_closes(
    gateway: Running, refusal: str
) -> None:
    # rstream closes its half-made client at once, with a Close: answered, not reset (a Close
    # written to a socket already closed reset it, and rstream raised that, not the refusal).
    with trio.fail_after(10):
        wire = await RabbitWire.open(gateway)
        await wire.hello()
        if refusal == "login":
            assert (await wire.authenticate("guest", "wrong")).code != ResponseCode.OK
        else:
            assert (await wire.authenticate()).code == ResponseCode.OK
            await wire.tune(frame_max=1_048_576, heartbeat=0)
            assert (await wire.open_vhost("nope")).code == ResponseCode.VIRTUAL_HOST_ACCESS_FAILURE
        reply = await wire.call(rs.Close(correlation_id=wire.corr(), code=1, reason="OK"))
        assert isinstance(reply, rs.CloseResponse) and reply.code == ResponseCode.OK
        assert await wire.closed() == []
        assert errors(gateway, "internal") == 0


@pytest.mark.parametrize(
    ("token", "code"),
    [
        (b"guest\0guest", ResponseCode.SASL_ERROR),  # one NUL
        (b"\0guest\0guest\0", ResponseCode.SASL_ERROR),  # three
        (b"", ResponseCode.SASL_ERROR),
        (b"\0gu\xffest\0guest", ResponseCode.AUTHENTICATION_FAILURE),  # not UTF-8: no such user
        (b"\0guest\0gu\xffest", ResponseCode.AUTHENTICATION_FAILURE),
    ],
    ids=["one NUL", "three NULs", "empty", "name not UTF-8", "password not UTF-8"],
)
async def test_a_malformed_plain_token_answers_its_code_then_closes(
    gateway: Running, token: bytes, code: int
) -> None:
    with trio.fail_after(10):
        wire = await RabbitWire.open(gateway)
        await wire.hello()
        request = rs.SaslAuthenticate(correlation_id=wire.corr(), mechanism="PLAIN", data=token)
        reply = await wire.call(request)
        assert isinstance(reply, rs.SaslAuthenticateResponse)
        assert reply.code == code
        assert await wire.closed() == []
        assert errors(gateway, "internal") == 0


def _logins(running: Running, outcome: str, error_type: str = "") -> float:
    assert running.metrics is not None
    value = running.metrics.registry.get_sample_value(
        "streamgate_command_duration_seconds_count",
        {"protocol": PROTOCOL, "command": "authenticate", "wire_command": "sasl_authenticate",
         "backend": "embedded", "outcome": outcome, "error_type": error_type},
    )  # fmt: skip
    return value or 0.0


async def test_logins_are_timed_and_counted_as_authenticate_commands(gateway: Running) -> None:
    with trio.fail_after(10):
        wire = await RabbitWire.open(gateway)
        await wire.hello()
        refused = await wire.authenticate("guest", "wrong")
        assert refused.code == ResponseCode.AUTHENTICATION_FAILURE
        assert await wire.closed() == []
        wire = await RabbitWire.connected(gateway)
        await wire.aclose()
    assert _logins(gateway, "error", "unauthorized") == 1
    assert _logins(gateway, "ok") == 1


async def test_open_of_an_unknown_virtual_host_is_0x0c_then_closed(gateway: Running) -> None:
    with trio.fail_after(10):
        wire = await RabbitWire.open(gateway)
        await wire.hello()
        assert (await wire.authenticate()).code == ResponseCode.OK
        await wire.tune(frame_max=1_048_576, heartbeat=0)
        reply = await wire.open_vhost("no-such-vhost")
        assert reply.code == ResponseCode.VIRTUAL_HOST_ACCESS_FAILURE
        assert await wire.closed() == []


# --- after Open: Close(code), then the end (§5 Close) -----------------------------------------


AFTER_OPEN = {
    "unknown-key": frame(0x0030, b"\x00\x00\x00\x07"),
    "server-frame": frame(Key.PUBLISH_CONFIRM, b"\x00\x00\x00\x00\x00"),
    "unknown-version": frame(Key.METADATA, b"\x00\x00\x00\x07\x00\x00\x00\x00", version=3),
    # Create whose stream name claims 50 bytes of the 3 that follow.
    "truncated": frame(Key.CREATE, b"\x00\x00\x00\x07\x00\x32abc"),
    # A whole Create and then bytes that belong to no field.
    "trailing": frame(Key.CREATE, b"\x00\x00\x00\x07" + string("x") + bytes(4) + b"junk"),
    "no-header": FRAME.pack(2, 0, 0)[:4] + b"\x00\x0d",
}


@pytest.mark.parametrize("kind", list(AFTER_OPEN))
async def test_bad_frame_after_open_is_close_0x0d(gateway: Running, kind: str) -> None:
    with trio.fail_after(15):
        wire = await RabbitWire.connected(gateway)
        # A good Create right behind it must not be processed: the server stops at the bad frame.
        behind = wire.codec.send(rs.Create(correlation_id=wire.corr(), stream="behind"))
        await wire.send_raw(AFTER_OPEN[kind] + behind)
        await refused_after_open(wire, ResponseCode.UNKNOWN_FRAME)
        assert errors(gateway, "protocol_error") == 1
        wire = await RabbitWire.connected(gateway)
        reply = await wire.call(rs.Metadata(correlation_id=wire.corr(), streams=("behind",)))
        assert isinstance(reply, rs.MetadataResponse)
        assert reply.streams[0].code == ResponseCode.STREAM_DOES_NOT_EXIST
        await wire.aclose()


async def test_frame_over_the_negotiated_frame_max_is_close_0x0e(gateway: Running) -> None:
    with trio.fail_after(15):
        wire = await RabbitWire.connected(gateway, frame_max=4096)
        await create(wire, "big")
        assert await declare(wire, 0, "big") == ResponseCode.OK
        await wire.send(publish(0, (1, b"x" * 10_240)))  # a 10 KiB frame
        close = await wire.expect(rs.Close)
        assert close.code == ResponseCode.FRAME_TOO_LARGE
        assert await wire.closed() == []  # no CloseResponse needed: the stream is unparsable
        assert errors(gateway, "frame_too_large") == 1

        # Nothing of it was stored: the first message of the stream is the next one published.
        wire = await RabbitWire.connected(gateway)
        assert await declare(wire, 0, "big") == ResponseCode.OK
        await wire.send(publish(0, (2, b"small")))
        confirm = await wire.expect(rs.PublishConfirm)
        assert confirm.publishing_ids == (2,)
        await wire.aclose()
        assert await first_delivery(gateway, "big") == [(0, b"small")]


# --- refused commands: a code, and the connection goes on -------------------------------------


async def test_publish_with_an_undeclared_publisher_is_0x12_for_each_id(gateway: Running) -> None:
    with trio.fail_after(10):
        wire = await RabbitWire.connected(gateway)
        await create(wire, "pe")
        await wire.send(publish(7, (1, b"a"), (2, b"b"), (5, b"c")))
        error = await wire.expect(rs.PublishError)
        assert error.publisher_id == 7
        assert [(e.publishing_id, e.code) for e in error.errors] == [
            (1, ResponseCode.PUBLISHER_DOES_NOT_EXIST),
            (2, ResponseCode.PUBLISHER_DOES_NOT_EXIST),
            (5, ResponseCode.PUBLISHER_DOES_NOT_EXIST),
        ]
        assert await declare(wire, 7, "pe") == ResponseCode.OK  # the connection goes on
        await wire.aclose()
        assert errors(gateway, "protocol_error") == 0


async def test_declare_publisher_twice_is_0x11(gateway: Running) -> None:
    with trio.fail_after(10):
        wire = await RabbitWire.connected(gateway)
        await create(wire, "dp")
        assert await declare(wire, 3, "dp") == ResponseCode.OK
        assert await declare(wire, 3, "dp") == ResponseCode.PRECONDITION_FAILED
        # One reference, one live publisher, even from another connection (§5).
        assert await declare(wire, 4, "dp", "ref") == ResponseCode.OK
        other = await RabbitWire.connected(gateway)
        assert await declare(other, 0, "dp", "ref") == ResponseCode.PRECONDITION_FAILED
        await other.aclose()
        await wire.aclose()


async def test_subscription_ids(gateway: Running) -> None:
    """Subscribe twice (0x03), Credit (the 0x8009 answer without a correlation id, code 4) and
    Unsubscribe (0x04) of unknown subscriptions, DeletePublisher of an unknown one (0x12)."""
    first = rs.OffsetSpec(type=rs.OffsetType.FIRST)
    with trio.fail_after(10):
        wire = await RabbitWire.connected(gateway)
        await create(wire, "subs")
        for expected in (ResponseCode.OK, ResponseCode.SUBSCRIPTION_ID_ALREADY_EXISTS):
            reply = await wire.call(
                rs.Subscribe(correlation_id=wire.corr(), subscription_id=1, stream="subs",
                             offset=first, credit=1)
            )  # fmt: skip
            assert isinstance(reply, rs.SubscribeResponse) and reply.code == expected, reply
        await wire.send(rs.Credit(subscription_id=99, credit=1))
        credit = await wire.expect(rs.CreditResponse)
        assert (credit.code, credit.subscription_id) == (4, 99)
        await wire.send(rs.Credit(subscription_id=1, credit=1))  # known: no answer
        reply = await wire.call(rs.Unsubscribe(correlation_id=wire.corr(), subscription_id=42))
        assert isinstance(reply, rs.UnsubscribeResponse)
        assert reply.code == ResponseCode.SUBSCRIPTION_ID_DOES_NOT_EXIST
        reply = await wire.call(rs.DeletePublisher(correlation_id=wire.corr(), publisher_id=9))
        assert isinstance(reply, rs.DeletePublisherResponse)
        assert reply.code == ResponseCode.PUBLISHER_DOES_NOT_EXIST
        reply = await wire.call(rs.Unsubscribe(correlation_id=wire.corr(), subscription_id=1))
        assert isinstance(reply, rs.UnsubscribeResponse) and reply.code == ResponseCode.OK
        assert not any(isinstance(f, rs.CreditResponse) for f in wire.received), wire.received
        await wire.aclose()
        assert errors(gateway, "protocol_error") == 0


async def test_query_offset_and_metadata_of_what_is_not_there(gateway: Running) -> None:
    with trio.fail_after(10):
        wire = await RabbitWire.connected(gateway)
        await create(wire, "here")
        reply = await wire.call(
            rs.QueryOffset(correlation_id=wire.corr(), reference="never-stored", stream="here")
        )
        assert isinstance(reply, rs.QueryOffsetResponse)
        assert (reply.code, reply.offset) == (ResponseCode.NO_OFFSET, 0)
        reply = await wire.call(rs.Metadata(correlation_id=wire.corr(), streams=("here", "nope")))
        assert isinstance(reply, rs.MetadataResponse)
        assert reply.brokers == (rs.Broker(reference=0, host=gateway.address(PROTOCOL)[0],
                                           port=gateway.address(PROTOCOL)[1]),)  # fmt: skip
        assert reply.streams == (
            rs.StreamMetadata(stream="here", code=ResponseCode.OK, leader=0),
            rs.StreamMetadata(stream="nope", code=ResponseCode.STREAM_DOES_NOT_EXIST,
                              leader=0xFFFF),
        )  # fmt: skip
        await wire.aclose()


def _gzip_records(*records: bytes) -> bytes:
    return b"".join(struct.pack(">I", len(r)) + r for r in records)


CORRUPT_SUB_BATCHES = {
    "not-gzip": rs.PublishedSubBatch(
        publishing_id=1, compression=1, record_count=2, uncompressed_length=14,
        data=b"\x1f\x8b\x08 this is no gzip stream",
    ),
    "cut-gzip": rs.PublishedSubBatch(
        publishing_id=1, compression=1, record_count=2, uncompressed_length=14,
        data=gzip.compress(_gzip_records(b"one", b"three"))[:-9],
    ),
    "wrong-count": rs.PublishedSubBatch(
        publishing_id=1, compression=1, record_count=5, uncompressed_length=16,
        data=gzip.compress(_gzip_records(b"one", b"three")),
    ),
    "wrong-length": rs.PublishedSubBatch(
        publishing_id=1, compression=1, record_count=2, uncompressed_length=400,
        data=gzip.compress(_gzip_records(b"one", b"three")),
    ),
}  # fmt: skip


@pytest.mark.parametrize("kind", list(CORRUPT_SUB_BATCHES))
async def test_corrupt_sub_entry_batch_is_a_publish_error_and_nothing_is_stored(
    gateway: Running, kind: str
) -> None:
    good = SubEntryBatch.build([b"one", b"three"], Compression.GZIP)
    with trio.fail_after(15):
        wire = await RabbitWire.connected(gateway)
        await create(wire, "gz")
        assert await declare(wire, 0, "gz") == ResponseCode.OK
        bad = CORRUPT_SUB_BATCHES[kind]
        await wire.send(rs.Publish(publisher_id=0, messages=(bad,)))
        error = await wire.expect(rs.PublishError)
        assert [e.publishing_id for e in error.errors] == [1]
        assert error.errors[0].code != ResponseCode.OK
        # The connection goes on, and the first thing stored is the next good batch.
        await wire.send(
            rs.Publish(publisher_id=0, messages=(
                rs.PublishedSubBatch(
                    publishing_id=2, compression=good.compression,
                    record_count=good.record_count,
                    uncompressed_length=good.uncompressed_length, data=good.data,
                ),
            ))
        )  # fmt: skip
        assert (await wire.expect(rs.PublishConfirm)).publishing_ids == (2,)
        await wire.aclose()
        wire = await RabbitWire.connected(gateway)
        reply = await wire.call(
            rs.Subscribe(correlation_id=wire.corr(), subscription_id=0, stream="gz",
                         offset=rs.OffsetSpec(type=rs.OffsetType.FIRST), credit=1)
        )  # fmt: skip
        assert isinstance(reply, rs.SubscribeResponse) and reply.code == ResponseCode.OK
        chunk = decode_chunk((await wire.expect(rs.Deliver)).chunk)
        assert chunk.chunk_id == 0 and len(chunk.entries) == 1
        entry = chunk.entries[0]
        assert isinstance(entry, SubEntryBatch) and entry.records() == (b"one", b"three")
        await wire.aclose()
        assert errors(gateway, "protocol_error") == 0


# --- heartbeats (§7) --------------------------------------------------------------------------


async def test_heartbeats_are_sent_and_a_silent_client_is_dropped(gateway: Running) -> None:
    with trio.fail_after(15):
        wire = await RabbitWire.open(gateway)
        await wire.hello()
        assert (await wire.authenticate()).code == ResponseCode.OK
        assert wire.server_tune is not None and wire.server_tune.heartbeat == 60  # proposed
        await wire.tune(frame_max=1_048_576, heartbeat=1)  # the client decides (§7)
        assert (await wire.open_vhost()).code == ResponseCode.OK
        silent_since = time.monotonic()
        frames = await wire.closed()  # we never send anything again
        silent_for = time.monotonic() - silent_since
    assert frames, "no Heartbeat came before the gateway closed"
    assert all(isinstance(f, rs.Heartbeat) for f in frames), frames
    assert len(frames) >= 2, frames  # one per interval while waiting ~3 of them
    assert 2.0 <= silent_for <= 8.0, silent_for  # "about 3 intervals", not 1, not never
    assert errors(gateway, "idle_timeout") == 1


# --- isolation --------------------------------------------------------------------------------


async def rstream_round_trip(
    host: str, port: int, stream: str, values: list[bytes]
) -> list[tuple[int, bytes]]:
    """Publish ``values`` with rstream (each confirmed) and read them back from FIRST."""
    kwargs = rstream_kwargs(port, host)
    async with RsProducer(**kwargs) as producer:
        await producer.create_stream(stream, exists_ok=True)
        for value in values:
            await producer.send_wait(stream, AMQPMessage(body=value))
    got: list[tuple[int, bytes]] = []

    async def on_message(message: AMQPMessage, context: MessageContext) -> None:
        got.append((context.offset, bytes(message.body)))

    consumer = Consumer(**kwargs)
    await consumer.start()
    try:
        await consumer.subscribe(
            stream, on_message, decoder=amqp_decoder,
            offset_specification=ConsumerOffsetSpecification(OffsetType.FIRST, None),
        )  # fmt: skip
        await eventually(lambda: len(got) >= len(values))
    finally:
        await consumer.close()
    return got


def _garbage_kinds() -> list[tuple[bytes, bool]]:
    """(bytes, half-close after them): pre-handshake garbage, and truncated frames."""
    kinds = [(data, False) for data in GARBAGE.values()]
    peer = rs.RabbitStreamClientCodec().send(rs.PeerProperties(correlation_id=1))
    kinds += [(peer[:-3], True), (peer[:3], True), (b"\x00\x00", True)]
    return kinds


async def test_garbage_connections_do_not_disturb_a_real_client(gateway: Running) -> None:
    kinds = _garbage_kinds()
    chosen = [kinds[i % len(kinds)] for i in range(30)]
    connected, go = trio.Event(), trio.Event()
    opened = 0
    outcomes: list[list[rs.Frame]] = []  # what each garbage connection got before the close

    async def garbage(data: bytes, eof: bool) -> None:
        nonlocal opened
        wire = await RabbitWire.open(gateway)
        await wire.send_raw(data[:2])  # too little to tell anything yet: the gateway waits
        opened += 1
        if opened == len(chosen):
            connected.set()
        await go.wait()
        await wire.send_raw(data[2:])
        if eof:
            await wire.stream.send_eof()
        outcomes.append(await wire.closed())

    values = [b"calm %d " % i + bytes(range(256)) for i in range(20)]
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            for data, eof in chosen:
                nursery.start_soon(garbage, data, eof)
            await connected.wait()
            got = await run_client(
                gateway, lambda h, p: rstream_round_trip(h, p, "while-waiting", values)
            )
            assert got == list(enumerate(values))
            go.set()  # all of them send their garbage now, while the real client works
            got = await run_client(
                gateway, lambda h, p: rstream_round_trip(h, p, "while-closing", values)
            )
            assert got == list(enumerate(values))
    assert len(outcomes) == len(chosen)  # every one was closed (what they got: tests above)
    closed = ("protocol_error", "frame_too_large", "preauth_frame_too_large")
    assert sum(errors(gateway, reason) for reason in closed) == len(chosen)
    assert errors(gateway, "internal") == 0
    with trio.fail_after(10):  # the listener still serves
        wire = await RabbitWire.connected(gateway)
        reply = await wire.call(
            rs.Metadata(correlation_id=wire.corr(), streams=("while-waiting", "while-closing"))
        )
        assert isinstance(reply, rs.MetadataResponse)
        assert [s.code for s in reply.streams] == [ResponseCode.OK, ResponseCode.OK]
        await wire.aclose()
