"""Bad input on the Kafka listener, over real sockets: refused requests close the connection,
bad record batches are partition errors that store nothing, and neither disturbs anyone else
(kafka.md §1.4, §3.3)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
from kio.index import load_request_schema

from gateway.app import Running
from protocols._wire import I16_BE, I32_BE
from protocols.kafka import Record, decode_batch, encode_batch
from protocols.kafka.build import build
from protocols.kafka.framing import (
    UNSUPPORTED_VERSION,
    KafkaClientCodec,
    KafkaResponse,
    encode_api_versions_fallback,
)
from protocols.kafka.versions import ApiKey, advertised
from tests.conftest import gateway_config
from tests.helpers.connections import connection_errors, until_closed

CORRUPT_MESSAGE = 2
INVALID_RECORD = 87
BASE_TS = 1_700_000_000_000


# --- a raw Kafka connection ---------------------------------------------------------------------


class Wire:
    """One TCP connection: requests framed by KafkaClientCodec, answers read frame by frame."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.codec = KafkaClientCodec("bad-input-test")
        self._received = bytearray()

    @classmethod
    async def open(cls, running: Running) -> Wire:
        return cls(await trio.open_tcp_stream(*running.address("kafka")))

    async def aclose(self) -> None:
        await self.stream.aclose()

    def frame(self, body: Any, *, expect_response: bool = True) -> tuple[int, bytes]:
        return self.codec.send(body, expect_response=expect_response)

    async def send(self, *bodies: Any, expect_response: bool = True) -> list[int]:
        """Frame ``bodies`` and write them with one send; returns their correlation ids."""
        framed = [self.frame(b, expect_response=expect_response) for b in bodies]
        await self.stream.send_all(b"".join(data for _, data in framed))
        return [corr for corr, _ in framed]

    async def read_frame(self) -> bytes:
        """The next whole frame from the gateway, size prefix included."""
        while True:
            if len(self._received) >= 4:
                end = 4 + I32_BE.unpack_from(self._received)[0]
                if len(self._received) >= end:
                    frame = bytes(self._received[:end])
                    del self._received[:end]
                    return frame
            data = await self.stream.receive_some(65536)
            assert data, "the gateway closed the connection"
            self._received += data

    async def response(self) -> KafkaResponse:
        self.codec.receive_data(await self.read_frame())
        resp = self.codec.next_response()
        assert isinstance(resp, KafkaResponse)
        return resp

    async def call(self, body: Any) -> Any:
        (corr,) = await self.send(body)
        resp = await self.response()
        assert resp.correlation_id == corr
        return resp.body

    async def closed(self) -> bytes:
        """Read until the gateway closes the connection (EOF or reset); returns what came, and
        closes our end too."""
        try:
            return await until_closed(self.stream, bytes(self._received))
        finally:
            await self.stream.aclose()


# --- requests -----------------------------------------------------------------------------------


def request(api_key: int, version: int, values: dict[str, Any]) -> Any:
    return build(load_request_schema(api_key, version), values)


def api_versions(version: int = 3) -> Any:
    return request(
        18, version, {"client_software_name": "bad-input", "client_software_version": "1"}
    )


def metadata(*topics: str) -> Any:
    """Metadata v5 that auto-creates ``topics``."""
    return request(
        3, 5, {"topics": [{"name": t} for t in topics], "allow_auto_topic_creation": True}
    )


def produce(topic: str, records: bytes, *, acks: int = -1) -> Any:
    return request(
        0,
        7,
        {
            "transactional_id": None,
            "acks": acks,
            "timeout": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
        },
    )


def list_offsets(topic: str) -> Any:
    """ListOffsets v1 for the latest offset (the high watermark) of partition 0."""
    partition = {"partition_index": 0, "timestamp": -1}
    return request(2, 1, {"replica_id": -1, "topics": [{"name": topic, "partitions": [partition]}]})


def fetch(topic: str, offset: int = 0) -> Any:
    partition = {
        "partition": 0,
        "current_leader_epoch": -1,
        "fetch_offset": offset,
        "log_start_offset": -1,
        "partition_max_bytes": 1 << 20,
    }
    return request(
        1,
        11,
        {
            "replica_id": -1,
            "max_wait": 0,
            "min_bytes": 1,
            "max_bytes": 1 << 20,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [partition]}],
            "forgotten_topics_data": [],
            "rack_id": "",
        },
    )


def batch(*values: bytes) -> bytes:
    records = [
        Record(offset_delta=i, timestamp_delta=i, key=b"k%d" % i, value=v)
        for i, v in enumerate(values)
    ]
    return encode_batch(records, base_timestamp_ms=BASE_TS)


def raw_frame(api_key: int, version: int, corr: int = 99, body: bytes = b"") -> bytes:
    client_id = b"bad-input-test"
    frame = I16_BE.pack(api_key) + I16_BE.pack(version) + I32_BE.pack(corr)
    frame += I16_BE.pack(len(client_id)) + client_id + body
    return I32_BE.pack(len(frame)) + frame


def partition_error(produced: Any) -> tuple[int, int]:
    (topic,) = produced.responses
    (part,) = topic.partition_responses
    return int(part.error_code), part.base_offset


async def stored(running: Running, topic: str) -> tuple[int, list[bytes | None]]:
    """On a connection of its own: the high watermark (ListOffsets) and every value (Fetch)."""
    wire = await Wire.open(running)
    try:
        offsets = await wire.call(list_offsets(topic))
        (part,) = offsets.topics[0].partitions
        assert int(part.error_code) == 0
        fetched = await wire.call(fetch(topic))
        (data,) = fetched.responses[0].partitions
        assert int(data.error_code) == 0
        assert data.high_watermark == part.offset
        values: list[bytes | None] = []
        records = bytes(data.records or b"")
        while records:
            size = 12 + I32_BE.unpack_from(records, 8)[0]
            _, decoded = decode_batch(records[:size])
            values += [r.value for r in decoded]
            records = records[size:]
        return part.offset, values
    finally:
        await wire.aclose()


async def create_topic(wire: Wire, topic: str) -> None:
    answer = await wire.call(metadata(topic))
    assert [(t.name, int(t.error_code)) for t in answer.topics] == [(topic, 0)]


def errors(running: Running, reason: str) -> float:
    return connection_errors(running, "kafka", reason)


# --- refused requests: the connection is closed, nothing is answered ----------------------------


async def test_unknown_api_key_closes_the_connection(gateway: Running) -> None:
    with trio.fail_after(10):
        before = errors(gateway, "protocol_error")
        wire = await Wire.open(gateway)
        await wire.stream.send_all(raw_frame(99, 0, body=b"\0" * 8))
        assert await wire.closed() == b""
        assert errors(gateway, "protocol_error") == before + 1
        assert errors(gateway, "internal") == 0


async def test_unsupported_fetch_version_closes_the_connection(gateway: Running) -> None:
    with trio.fail_after(10):
        for frame in (
            raw_frame(1, 3, body=b"\0" * 32),  # below the advertised 4-11
            KafkaClientCodec("t").send(
                request(
                    1,
                    12,
                    {"max_wait": 0, "min_bytes": 0, "topics": [], "forgotten_topics_data": []},
                )
            )[1],
        ):
            wire = await Wire.open(gateway)
            await wire.stream.send_all(frame)
            assert await wire.closed() == b""
        assert errors(gateway, "protocol_error") == 2


async def test_oversized_frame_closed_without_reading_the_body(
    gateway: Running, tmp_path: Path
) -> None:
    limit = gateway_config(tmp_path / "data").limits.max_frame_bytes  # as the fixture's
    assert gateway.metrics is not None
    registry = gateway.metrics.registry
    with trio.fail_after(10):
        for declared in (limit + 1, -1):
            wire = await Wire.open(gateway)
            # Only the size prefix: the gateway must refuse it without waiting for the body.
            await wire.stream.send_all(I32_BE.pack(declared))
            assert await wire.closed() == b""
        assert errors(gateway, "frame_too_large") == 2
        # The two size prefixes and nothing more were read.
        assert (
            registry.get_sample_value("streamgate_bytes_received_total", {"protocol": "kafka"}) == 8
        )
        wire = await Wire.open(gateway)  # the listener still serves
        assert int((await wire.call(api_versions())).error_code) == 0
        await wire.aclose()


async def test_newer_api_versions_gets_the_fallback_then_v3_works(gateway: Running) -> None:
    served = advertised(sasl=False)
    with trio.fail_after(10):
        wire = await Wire.open(gateway)
        # ApiVersions v9 does not exist yet: its body is whatever a future client sends.
        await wire.stream.send_all(raw_frame(18, 9, corr=77, body=b"\x07future\x00\x00"))
        answer = await wire.read_frame()
        assert answer == encode_api_versions_fallback(77, served)
        assert I16_BE.unpack_from(answer, 8)[0] == UNSUPPORTED_VERSION  # v0 body: error first
        # The same connection then speaks v3, as librdkafka does after the fallback.
        body = await wire.call(api_versions(3))
        assert int(body.error_code) == 0
        got = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
        assert got == served
        assert got[ApiKey.API_VERSIONS] == (0, 4)
        await wire.aclose()
        assert errors(gateway, "protocol_error") == 0


# confluent-kafka's ApiVersions v3 (kafka.md §7) with one unknown tagged field (tag 5, empty)
# in its body, as a newer client may send: KIP-482 readers skip tags they do not know.
AV3_UNKNOWN_TAG = bytes.fromhex(
    "000000420012000300000001000772646b61666b610017636f6e666c75656e742d6b61666b612d707974686f6e"
    "16322e31362e312d72646b61666b612d322e31362e30010500"
)


async def test_unknown_tagged_field_in_api_versions_is_skipped(gateway: Running) -> None:
    with trio.fail_after(10):
        wire = await Wire.open(gateway)
        await wire.stream.send_all(AV3_UNKNOWN_TAG)
        answer = await wire.read_frame()
        assert I32_BE.unpack_from(answer, 4)[0] == 1
        await wire.aclose()
        assert errors(gateway, "internal") == 0


# --- bad record batches: a partition error, nothing stored, the connection lives on -------------


async def _produce_refused(gateway: Running, topic: str, records: bytes) -> int:
    wire = await Wire.open(gateway)
    await create_topic(wire, topic)
    code, base = partition_error(await wire.call(produce(topic, records)))
    assert base == -1
    assert await stored(gateway, topic) == (0, [])
    # The connection still works, and the next good batch is the first one stored.
    assert partition_error(await wire.call(produce(topic, batch(b"good")))) == (0, 0)
    assert await stored(gateway, topic) == (1, [b"good"])
    await wire.aclose()
    assert errors(gateway, "protocol_error") == 0
    return code


async def test_corrupt_crc_is_corrupt_message(gateway: Running) -> None:
    good = batch(b"value one", b"value two")
    bad = good[:-3] + bytes([good[-3] ^ 0x01]) + good[-2:]  # a value byte, inside the CRC
    with trio.fail_after(10):
        assert await _produce_refused(gateway, "crc", bad) == CORRUPT_MESSAGE


async def test_truncated_batch_is_corrupt_message(gateway: Running) -> None:
    with trio.fail_after(10):
        for cut in (5, 61):
            topic = f"cut-{cut}"
            code = await _produce_refused(gateway, topic, batch(b"a", b"b")[:-cut])
            assert code == CORRUPT_MESSAGE


async def test_two_batches_in_one_partition_are_refused(gateway: Running) -> None:
    # Produce v3+ carries exactly one batch per partition (Kafka's LogValidator).
    with trio.fail_after(10):
        code = await _produce_refused(gateway, "two", batch(b"a") + batch(b"b"))
        assert code in (CORRUPT_MESSAGE, INVALID_RECORD)


async def test_acks0_with_a_corrupt_batch_closes_the_connection(gateway: Running) -> None:
    good = batch(b"lost")
    bad = good[:-2] + bytes([good[-2] ^ 0xFF]) + good[-1:]
    with trio.fail_after(10):
        wire = await Wire.open(gateway)
        await create_topic(wire, "acks0-bad")
        # acks=0 has no response to carry the error: the broker closes (kafka.md §1.4 trap 4).
        await wire.send(produce("acks0-bad", bad, acks=0), expect_response=False)
        assert await wire.closed() == b""
        assert errors(gateway, "protocol_error") == 1
        assert await stored(gateway, "acks0-bad") == (0, [])


async def test_acks0_success_has_no_response_but_is_stored(gateway: Running) -> None:
    with trio.fail_after(10):
        wire = await Wire.open(gateway)
        await create_topic(wire, "acks0")
        produced, asked = await wire.send(
            produce("acks0", batch(b"fire and forget"), acks=0), api_versions()
        )
        # The produce is registered as unanswered in the codec: an answer to it would be a
        # "response to unknown correlation id" error here. The first answer is ApiVersions'.
        resp = await wire.response()
        assert resp.correlation_id == asked != produced
        assert await stored(gateway, "acks0") == (1, [b"fire and forget"])
        await wire.aclose()


# --- pipelining and isolation -------------------------------------------------------------------


async def test_ten_pipelined_requests_are_answered_in_order(gateway: Running) -> None:
    topic = "pipe"
    bodies = [
        metadata(topic),
        api_versions(3),
        list_offsets(topic),
        produce(topic, batch(b"first")),
        fetch(topic),
        api_versions(0),
        produce(topic, batch(b"second")),
        list_offsets(topic),
        fetch(topic, 1),
        metadata(),
    ]
    with trio.fail_after(10):
        wire = await Wire.open(gateway)
        ids = await wire.send(*bodies)  # one write holding all ten frames
        answers = [await wire.response() for _ in bodies]
        assert [a.correlation_id for a in answers] == ids
        assert [a.api_key for a in answers] == [b.__api_key__ for b in bodies]
        # Each was handled after the ones before it.
        assert partition_error(answers[3].body) == (0, 0)
        assert partition_error(answers[6].body) == (0, 1)
        assert answers[2].body.topics[0].partitions[0].offset == 0
        assert answers[7].body.topics[0].partitions[0].offset == 2
        assert answers[4].body.responses[0].partitions[0].high_watermark == 1
        assert answers[8].body.responses[0].partitions[0].high_watermark == 2
        await wire.aclose()


GARBAGE: dict[str, bytes] = {
    "unknown api key": raw_frame(99, 0, body=b"\0" * 8),
    "fetch v99": raw_frame(1, 99, body=b"\0" * 8),
    "produce v1 (refused)": raw_frame(0, 1, body=b"\0" * 16),
    "no room for a header": I32_BE.pack(3) + b"abc",
    "truncated body": raw_frame(3, 5, body=I32_BE.pack(5)),
    "trailing bytes": raw_frame(3, 5, body=I32_BE.pack(0) + b"\x01\x00"),
    "sasl handshake on a plain listener": raw_frame(17, 1, body=b"\x00\x05PLAIN"),
}
OVERSIZED = I32_BE.pack(2**31 - 1)


async def test_garbage_connections_do_not_disturb_a_good_client(gateway: Running) -> None:
    kinds = [*GARBAGE.values(), OVERSIZED]
    n = 50
    protocol_errors = sum(1 for i in range(n) if kinds[i % len(kinds)] is not OVERSIZED)
    before = errors(gateway, "protocol_error")
    assert before == 0  # created at start, so dashboards show 0 rather than no data
    connected = trio.Event()
    go = trio.Event()
    opened = 0
    silent = 0

    async def garbage(i: int) -> None:
        nonlocal opened, silent
        junk = kinds[i % len(kinds)]
        stream = await trio.open_tcp_stream(*gateway.address("kafka"))
        async with stream:
            await stream.send_all(junk[:2])  # half a size prefix: the gateway waits for more
            opened += 1
            if opened == n:
                connected.set()
            await go.wait()
            await stream.send_all(junk[2:])
            if await Wire(stream).closed() == b"":
                silent += 1

    async def good_round(wire: Wire, topic: str, value: bytes, offset: int) -> None:
        assert int((await wire.call(api_versions())).error_code) == 0
        await create_topic(wire, topic)
        assert partition_error(await wire.call(produce(topic, batch(value)))) == (0, offset)
        fetched = await wire.call(fetch(topic, offset))
        assert fetched.responses[0].partitions[0].high_watermark == offset + 1

    with trio.fail_after(30):
        good = await Wire.open(gateway)
        async with trio.open_nursery() as nursery:
            for i in range(n):
                nursery.start_soon(garbage, i)
            await connected.wait()
            await good_round(good, "calm", b"while 50 bad connections wait", 0)
            go.set()  # all of them send their garbage now, while the good client works
            await good_round(good, "calm", b"while they are closed", 1)
        assert silent == n  # none of them got an answer
        await good_round(good, "calm", b"after", 2)
        await good.aclose()
        other = await Wire.open(gateway)  # the listener still accepts
        assert await stored(gateway, "calm") == (
            3,
            [b"while 50 bad connections wait", b"while they are closed", b"after"],
        )
        await other.aclose()
    assert errors(gateway, "protocol_error") == before + protocol_errors
    assert errors(gateway, "frame_too_large") == n - protocol_errors
    assert errors(gateway, "internal") == 0
