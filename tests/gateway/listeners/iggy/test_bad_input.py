"""Bad input on the Iggy listener, over raw sockets, in both framings (iggy.md §3, §9).

A body the gateway cannot take is answered with its Iggy status and the connection goes on, as
with the real server: unknown codes (3 InvalidCommand; 5 FeatureUnavailable for a command Iggy
defines that the gateway does not serve), checksums (4027, 4039), requests
before a login (40), a malformed VSR login (an Eviction frame, reason 15). A broken frame
(oversized, truncated, a VSR header that is no Request) closes the connection without a reply.
None of it disturbs anyone else.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import trio
from apache_iggy import Consumer as IggyConsumer
from apache_iggy import PollingStrategy as IggyPolling
from apache_iggy import SendMessage

from gateway.app import Running
from protocols._wire import U32_LE
from protocols.iggy import (
    CommandCode,
    CreateStream,
    CreateTopic,
    Era,
    Eviction,
    EvictionReason,
    GetStreams,
    Message,
    PartitionId,
    Ping,
    SendMessages,
    Status,
    Streams,
    UnknownCommand,
    pack_protocol_version,
)
from protocols.iggy.legacy import encode_legacy_request
from protocols.iggy.vsr import (
    COMMAND_AT,
    COMMAND_EVICTION,
    COMMAND_REPLY,
    HEADER_SIZE,
    RequestHeader,
    encode_eviction,
    encode_request_header,
)
from tests.conftest import gateway_config
from tests.helpers.connections import bytes_received, connection_errors
from tests.helpers.iggy_wire import IggyWire, login_command

from .conftest import Clients, run_iggy

FRAMINGS = (Era.C, Era.B)  # the VSR framing and the legacy one
STATUS_AT = 216  # VSR reply header (§3.3)
REASON_AT = 255  # VSR Eviction frame (§3.4)
UNKNOWN_CODE = 9999


def errors(running: Running, reason: str) -> float:
    return connection_errors(running, "iggy", reason)


def vsr_header(
    *, size: int, operation: int = 2, code: int = 1, command: int | None = None
) -> bytes:
    """A VSR request header by hand; ``size`` is the whole frame's, ``command`` overrides
    byte 60 (5 = Request)."""
    header = bytearray(
        encode_request_header(
            RequestHeader(client=0xC0FFEE, request=1, operation=operation, code=code),
            size - HEADER_SIZE,
        )
    )
    if command is not None:
        header[COMMAND_AT] = command
    return bytes(header)


async def make_topic(wire: IggyWire, stream: str, topic: str) -> None:
    await wire.ok(CreateStream(name=stream))
    await wire.ok(CreateTopic(stream_id=stream, name=topic, partitions_count=1))


async def stored(wire: IggyWire, stream: str, topic: str) -> list[bytes]:
    """Every payload in partition 0, polled from the start without committing anything."""
    return [m.payload for m in (await wire.poll(stream, topic, 0)).messages]


def send(stream: str, topic: str, *payloads: bytes) -> SendMessages:
    messages = tuple(Message(id=i + 1, payload=p) for i, p in enumerate(payloads))
    return SendMessages(
        stream_id=stream, topic_id=topic, partitioning=PartitionId(id=0), messages=messages
    )


# --- refused requests: a status, and the connection goes on ----------------------------------


async def test_ping_before_login_works_and_anything_else_is_40(gateway: Running) -> None:
    with trio.fail_after(10):
        for era in FRAMINGS:
            wire = await IggyWire.open(gateway, era)
            assert (await wire.call(Ping())).status == Status.OK
            assert (await wire.call(GetStreams())).status == Status.UNAUTHENTICATED
            assert (await wire.call(Ping())).status == Status.OK  # still connected
            await wire.ok(login_command(era))
            assert isinstance(await wire.ok(GetStreams()), Streams | None)
            await wire.aclose()
        assert errors(gateway, "protocol_error") == 0


async def test_unknown_command_code_is_invalid_command(gateway: Running) -> None:
    """A code Iggy does not define: InvalidCommand (3), as the real server (issue 19)."""
    with trio.fail_after(10):
        for era in FRAMINGS:
            wire = await IggyWire.logged_in(gateway, era)
            reply = await wire.call(UnknownCommand(code=UNKNOWN_CODE, payload=b"\x01\x02\x03"))
            assert reply.status == Status.INVALID_COMMAND, (era, reply)
            await wire.ok(Ping())
            await wire.ok(GetStreams())
            await wire.aclose()
        assert errors(gateway, "protocol_error") == 0


async def test_unknown_code_by_hand_gets_the_status_bytes(gateway: Running) -> None:
    """The same over hand-built frames, to pin the bytes: legacy ``[3][0]`` (§9.1); VSR a
    256-byte reply with status 3 at offset 216 and the client echoed at 160 (§3.3)."""
    with trio.fail_after(10):
        legacy = await IggyWire.logged_in(gateway, Era.B)
        await legacy.stream.send_all(encode_legacy_request(UNKNOWN_CODE, b"junk"))
        assert await legacy.raw_frame() == U32_LE.pack(Status.INVALID_COMMAND) + U32_LE.pack(0)
        await legacy.ok(Ping())
        await legacy.aclose()

        vsr = await IggyWire.logged_in(gateway, Era.C)
        header = RequestHeader(
            client=vsr.codec.client_id,
            request=vsr.codec.request_number,
            operation=2,
            session=vsr.codec.session,
            code=UNKNOWN_CODE,
        )
        await vsr.stream.send_all(encode_request_header(header, 4) + b"junk")
        reply = await vsr.raw_frame()
        assert len(reply) == HEADER_SIZE
        assert reply[COMMAND_AT] == COMMAND_REPLY
        assert U32_LE.unpack_from(reply, STATUS_AT)[0] == Status.INVALID_COMMAND
        assert int.from_bytes(reply[160:176], "little") == vsr.codec.client_id
        assert reply[208] == 2  # the operation echoed
        await vsr.ok(Ping())
        await vsr.aclose()


def _batch_at(frame: bytes) -> int:
    """Where the batch of a VSR SendMessages frame starts (§6.1: after the metadata)."""
    return HEADER_SIZE + 4 + int(U32_LE.unpack_from(frame, HEADER_SIZE)[0])


def _flip_payload(frame: bytes) -> bytes:
    first_frame = _batch_at(frame) + 256
    at = first_frame + 48  # the first payload byte: inside the message checksum, not the batch's
    return frame[:at] + bytes([frame[at] ^ 0x01]) + frame[at + 1 :]


def _flip_batch_checksum(frame: bytes) -> bytes:
    at = _batch_at(frame) + 40
    return frame[:at] + bytes([frame[at] ^ 0xFF]) + frame[at + 1 :]


async def _refused_send(
    gateway: Running, topic: str, corrupt: Callable[[bytes], bytes], expected: int
) -> None:
    wire = await IggyWire.logged_in(gateway, Era.C)
    await make_topic(wire, topic, topic)
    frame = wire.codec.send(send(topic, topic, b"first value", b"second value"))
    await wire.stream.send_all(corrupt(frame))
    reply = await wire.reply()
    assert reply.status == expected, reply
    assert await stored(wire, topic, topic) == []  # nothing of the batch was stored
    # The connection still works, and the next good batch is the first one stored.
    await wire.ok(send(topic, topic, b"good"))
    assert await stored(wire, topic, topic) == [b"good"]
    await wire.aclose()
    assert errors(gateway, "protocol_error") == 0


async def test_wrong_message_checksum_is_4027_and_nothing_is_stored(gateway: Running) -> None:
    with trio.fail_after(10):
        await _refused_send(gateway, "ck-msg", _flip_payload, Status.INVALID_MESSAGE_CHECKSUM)


async def test_wrong_batch_checksum_is_4039_and_nothing_is_stored(gateway: Running) -> None:
    with trio.fail_after(10):
        await _refused_send(
            gateway, "ck-batch", _flip_batch_checksum, Status.INVALID_BATCH_CHECKSUM
        )


async def test_malformed_vsr_login_is_an_eviction_with_reason_15(gateway: Running) -> None:
    with trio.fail_after(10):
        for body in (
            b"",  # nothing at all
            U32_LE.pack(pack_protocol_version(0, 11, 0)) + b"\x08rust",  # cut inside a name
            U32_LE.pack(pack_protocol_version(0, 11, 0)) + b"\x00",  # a zero-length name
        ):
            wire = await IggyWire.open(gateway, Era.C)
            header = RequestHeader(client=0xABCDEF, request=0, operation=1)
            await wire.stream.send_all(encode_request_header(header, len(body)) + body)
            frame = await wire.raw_frame()
            got = (len(frame), frame[COMMAND_AT], frame[REASON_AT])
            assert got == (HEADER_SIZE, COMMAND_EVICTION, EvictionReason.MALFORMED_LOGIN), (
                f"login body {body.hex()}: frame of {got[0]} bytes, command {got[1]}, "
                f"status {U32_LE.unpack_from(frame, STATUS_AT)[0]}, reason {got[2]}"
            )
            assert int.from_bytes(frame[128:144], "little") == 0xABCDEF  # the client echoed
            expected = Eviction(client=0xABCDEF, reason=EvictionReason.MALFORMED_LOGIN)
            assert frame == encode_eviction(expected)  # every other byte is 0 (§3.4)
            await wire.aclose()


async def test_malformed_legacy_login_is_invalid_format_then_login_works(
    gateway: Running,
) -> None:
    with trio.fail_after(10):
        wire = await IggyWire.open(gateway, Era.B)
        # LoginUser whose username claims 9 bytes of the 4 that follow.
        await wire.stream.send_all(encode_legacy_request(CommandCode.LOGIN_USER, b"\x09iggy"))
        assert await wire.raw_frame() == U32_LE.pack(Status.INVALID_FORMAT) + U32_LE.pack(0)
        await wire.ok(login_command(Era.B))
        await wire.ok(GetStreams())
        await wire.aclose()


# --- broken frames: the connection is closed, nothing is answered ----------------------------


async def test_oversized_frame_is_closed_without_reading_the_body(
    gateway: Running, tmp_path: Path
) -> None:
    limit = gateway_config(tmp_path / "data").limits.max_frame_bytes  # as the fixture's
    prefixes = [
        vsr_header(size=limit + 1),  # VSR: the size at offset 48 counts the whole frame
        vsr_header(size=2**32 - 1),
        U32_LE.pack(limit + 1) + U32_LE.pack(CommandCode.SEND_MESSAGES),  # legacy
        U32_LE.pack(2**32 - 1) + U32_LE.pack(CommandCode.PING),
    ]
    with trio.fail_after(10):
        before = bytes_received(gateway, "iggy")
        for prefix in prefixes:
            wire = await IggyWire.open(gateway, Era.C)
            # Only the header: the gateway must refuse it without waiting for the body.
            await wire.stream.send_all(prefix)
            assert await wire.closed() == b"", prefix[:8]
        # before a login: above the pre-login limit (limits.max_preauth_frame_bytes)
        assert errors(gateway, "preauth_frame_too_large") == len(prefixes)
        assert bytes_received(gateway, "iggy") - before == sum(map(len, prefixes))  # nothing more
        for era in FRAMINGS:  # the listener still serves
            wire = await IggyWire.logged_in(gateway, era)
            await wire.ok(GetStreams())
            await wire.aclose()


async def test_truncated_frame_then_eof_is_closed(gateway: Running) -> None:
    ping = encode_legacy_request(CommandCode.PING, b"")
    login = encode_legacy_request(CommandCode.LOGIN_USER, b"\x04iggy\x04iggy")
    cuts = [
        vsr_header(size=HEADER_SIZE)[:100],  # inside the 256-byte header
        vsr_header(size=HEADER_SIZE + 50) + b"x" * 20,  # inside the declared body
        ping[:6],  # inside the legacy length/code prefix
        login[:-3],  # inside a legacy payload
    ]
    with trio.fail_after(10):
        for data in cuts:
            wire = await IggyWire.open(gateway, Era.C)
            await wire.stream.send_all(data)
            await wire.stream.send_eof()
            assert await wire.closed() == b"", data[:8]
        assert errors(gateway, "protocol_error") == len(cuts)
        assert errors(gateway, "internal") == 0


async def test_vsr_header_that_is_no_request_is_closed(gateway: Running) -> None:
    with trio.fail_after(10):
        for command in (COMMAND_REPLY, COMMAND_EVICTION, 0, 99):
            wire = await IggyWire.open(gateway, Era.C)
            # The header declares a body that never comes: the command is refused first.
            await wire.stream.send_all(vsr_header(size=HEADER_SIZE + 100, command=command))
            assert await wire.closed() == b"", command
        # After a good exchange on a logged-in connection too.
        wire = await IggyWire.logged_in(gateway, Era.C)
        await wire.ok(Ping())
        await wire.stream.send_all(vsr_header(size=HEADER_SIZE, command=COMMAND_REPLY))
        assert await wire.closed() == b""
        # A size below the header's own 256 bytes.
        wire = await IggyWire.open(gateway, Era.C)
        await wire.stream.send_all(
            vsr_header(size=HEADER_SIZE)[:48] + U32_LE.pack(100) + bytes(204)
        )
        assert await wire.closed() == b""
        assert errors(gateway, "protocol_error") == 6


async def test_garbage_first_bytes_in_the_legacy_framing(gateway: Running) -> None:
    http = b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"  # "GET " is a length of 542 MB
    short = U32_LE.pack(2) + U32_LE.pack(CommandCode.PING)  # no room for the code
    with trio.fail_after(10):
        for data, reason in ((http, "preauth_frame_too_large"), (short, "protocol_error")):
            before = errors(gateway, reason)
            wire = await IggyWire.open(gateway, Era.B)
            await wire.stream.send_all(data)
            assert await wire.closed() == b"", data
            assert errors(gateway, reason) == before + 1
        # A well-framed unknown code before any login: refused as every request before one.
        wire = await IggyWire.open(gateway, Era.B)
        await wire.stream.send_all(encode_legacy_request(0xDEADBEEF, b"\xff" * 12))
        assert await wire.raw_frame() == U32_LE.pack(Status.UNAUTHENTICATED) + U32_LE.pack(0)
        await wire.ok(Ping())  # and the connection goes on
        await wire.aclose()


# --- isolation -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Garbage:
    data: bytes
    eof: bool = False  # half-close after the data (a truncated frame)
    answer: bytes | None = None  # None: the gateway closes without a word
    reason: str = "protocol_error"  # the connection error counted, when closed


def _garbage_kinds() -> list[Garbage]:
    legacy_ping = encode_legacy_request(CommandCode.PING, b"")
    return [
        Garbage(b"GET / HTTP/1.1\r\n\r\n", reason="preauth_frame_too_large"),
        # TLS: a legacy length of 33 MB, above the pre-login limit
        Garbage(
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(40),
            eof=True,
            reason="preauth_frame_too_large",
        ),
        Garbage(U32_LE.pack(1) + U32_LE.pack(1)),
        Garbage(vsr_header(size=2**32 - 1), reason="preauth_frame_too_large"),
        Garbage(vsr_header(size=HEADER_SIZE, command=COMMAND_REPLY)),
        Garbage(vsr_header(size=HEADER_SIZE + 10)[:200], eof=True),
        Garbage(legacy_ping[:5], eof=True),
        Garbage(
            encode_legacy_request(CommandCode.GET_STREAMS, b""),
            answer=U32_LE.pack(Status.UNAUTHENTICATED) + U32_LE.pack(0),
        ),
    ]


async def test_garbage_connections_do_not_disturb_a_real_client(gateway: Running) -> None:
    kinds = _garbage_kinds()
    chosen = [kinds[i % len(kinds)] for i in range(50)]
    reasons = ("protocol_error", "frame_too_large", "preauth_frame_too_large")
    before = {r: errors(gateway, r) for r in reasons}
    connected = trio.Event()
    go = trio.Event()
    opened = 0
    outcomes: list[bool] = []

    async def garbage(kind: Garbage) -> None:
        nonlocal opened
        wire = await IggyWire.open(gateway, Era.B)
        async with wire.stream:
            # Two bytes: too few to tell the framing (§0.3), so the gateway waits for more.
            await wire.stream.send_all(kind.data[:2])
            opened += 1
            if opened == len(chosen):
                connected.set()
            await go.wait()
            await wire.stream.send_all(kind.data[2:])
            if kind.eof:
                await wire.stream.send_eof()
            if kind.answer is None:
                outcomes.append(await wire.closed() == b"")
            else:
                outcomes.append(await wire.raw_frame() == kind.answer)

    async def real_client(clients: Clients, stream: str, values: list[bytes]) -> list[bytes]:
        client = await clients.connect()
        await client.create_stream(stream)
        await client.create_topic(stream, "calm", 1)
        await client.send_messages(stream, "calm", 0, [SendMessage(v) for v in values])
        polled = await client.poll_messages(
            stream,
            "calm",
            consumer=IggyConsumer.Single("calm"),
            polling_strategy=IggyPolling.First(),
            count=100,
            auto_commit=True,
            partition_id=0,
        )
        return [m.payload() for m in polled]

    values = [b"value %d " % i + bytes(range(256)) for i in range(20)]
    with trio.fail_after(40):
        async with trio.open_nursery() as nursery:
            for kind in chosen:
                nursery.start_soon(garbage, kind)
            await connected.wait()
            got = await run_iggy(gateway, lambda c: real_client(c, "while-waiting", values))
            assert got == values
            go.set()  # all of them send their garbage now, while the real client works
            got = await run_iggy(gateway, lambda c: real_client(c, "while-closing", values))
            assert got == values
    assert outcomes == [True] * len(chosen)
    for reason in reasons:
        closed = sum(1 for k in chosen if k.answer is None and k.reason == reason)
        assert errors(gateway, reason) == before[reason] + closed, reason
    assert errors(gateway, "internal") == 0
    with trio.fail_after(10):
        wire = await IggyWire.logged_in(gateway, Era.C)  # the listener still serves
        streams = await wire.ok(GetStreams())
        assert isinstance(streams, Streams)
        assert sorted(s.name for s in streams.streams) == ["while-closing", "while-waiting"]
        await wire.aclose()
