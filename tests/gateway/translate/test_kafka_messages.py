"""The ``kafka`` wire format's carried fields (gateway/translate/kafka/messages.py): what a
Kafka record cannot hold rides in trailing ``streamgate.*`` headers only when needed, comes back
out whole, and anything malformed is left as the plain headers it is."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gateway.model import (
    Header,
    HeaderKind,
    Message,
    WireBatch,
)
from gateway.translate.kafka.messages import (
    CARRIED_ID,
    CARRIED_KINDS,
    CARRIED_MICROS,
    WIRE_FORMAT,
    decode_wire,
    encode_append,
)
from protocols.kafka import Record, decode_batch, encode_batch

NOW_US = 1_700_000_000_000_000


def round_trip(messages: list[Message]) -> list[Message]:
    data = encode_append(messages, now_us=NOW_US)
    return decode_wire(WireBatch(format=WIRE_FORMAT, data=data, count=len(messages)))


headers = st.lists(
    st.builds(
        Header,
        st.text(max_size=5),
        st.binary(max_size=5),
        st.sampled_from([k for k in HeaderKind if k is not HeaderKind.NULL]),
    ),
    max_size=4,
)
messages = st.builds(
    Message,
    value=st.binary(max_size=20),
    key=st.none() | st.binary(max_size=5),
    headers=headers.map(tuple),
    timestamp_us=st.integers(min_value=1, max_value=(1 << 50)),
    id=st.integers(min_value=0, max_value=(1 << 128) - 1),
    offset=st.just(-1),
)


@given(st.lists(messages, min_size=1, max_size=5))
def test_every_field_comes_back(sent: list[Message]) -> None:
    got = round_trip(sent)
    assert [m._replace(offset=-1) for m in got] == sent
    assert [m.offset for m in got] == list(range(len(sent)))


def test_plain_messages_carry_nothing_and_unset_times_are_stamped() -> None:
    # a clock reading's microseconds are not the message's: no streamgate.* carrier for them
    data = encode_append([Message(value=b"v", headers=(Header("a", b"1"),))], now_us=NOW_US + 123)
    header, [record] = decode_batch(data)
    assert record.headers == (("a", b"1"),)
    assert header.timestamp_of(record) == NOW_US // 1000


def record_with(*headers: tuple[str, bytes | None]) -> WireBatch:
    record = Record(offset_delta=0, timestamp_delta=0, key=None, value=b"v", headers=headers)
    data = encode_batch([record], base_timestamp_ms=1000)
    return WireBatch(format=WIRE_FORMAT, data=data, count=1)


def test_malformed_carriers_stay_plain_headers() -> None:
    for bad in (
        (("a", b"1"), (CARRIED_KINDS, b"\x02\x02")),  # one kind too many
        (("a", b"1"), (CARRIED_KINDS, b"\xff")),  # no such kind
        ((CARRIED_MICROS, b"\x03\xe8"),),  # 1000 us is not below a millisecond
        ((CARRIED_ID, b"\x01"),),  # not 16 bytes
        ((CARRIED_ID, None),),
    ):
        [message] = decode_wire(record_with(*bad))
        assert [(h.name, h.value) for h in message.headers] == [(k, v or b"") for k, v in bad]
        assert (message.timestamp_us, message.id) == (1_000_000, 0)


def test_carriers_only_at_the_end() -> None:
    [message] = decode_wire(record_with((CARRIED_ID, bytes(15) + b"\x07"), ("after", b"x")))
    assert message.id == 0 and len(message.headers) == 2
