"""A producer's batch checked without one object per message (``sent_batch``): the scan finds
what the full decode finds, its summary matches the messages, and they are decoded only on use."""

from __future__ import annotations

import pytest
from hypothesis import given

from protocols._wire import RemoteProtocolError
from protocols.iggy import Era
from protocols.iggy.batch import decode_batch, encode_batch
from protocols.iggy.frames_messages import Message
from protocols.iggy.headers import Header, HeaderKind, HeaderValue
from protocols.iggy.sent_batch import SentMessages, empty_payload, origin_range, scan_sent_batch
from protocols.iggy.status import Status
from protocols.iggy.wire import Reader
from tests.protocols.iggy import strategies


def _batch(messages: tuple[Message, ...], deltas: list[int] | None = None) -> bytes:
    return encode_batch(
        messages,
        partition_id=0,
        base_offset=0,
        base_timestamp=0,
        offset_deltas=deltas if deltas is not None else list(range(len(messages))),
    )


@given(strategies.messages(Era.C, polled=False))
def test_scan_summarises_what_the_decode_reads(messages: tuple[Message, ...]) -> None:
    data = _batch(messages)
    reader = Reader(data)
    sent, in_order = scan_sent_batch(reader)
    assert reader.at_end() and in_order
    assert sent.batch == data
    assert len(sent) == len(messages)
    assert sent == messages  # producer fields: id, payload, headers, origin timestamp
    assert empty_payload(sent) == empty_payload(messages) == any(not m.payload for m in messages)
    if messages:
        assert origin_range(sent) == origin_range(messages)
    full = decode_batch(Reader(data), verify=True)
    assert [m.payload for m in full] == [m.payload for m in sent]


def test_messages_are_decoded_only_when_read() -> None:
    messages = tuple(
        Message(id=i + 1, payload=b"p%d" % i, origin_timestamp=1_000 + 10 * i) for i in range(5)
    )
    sent, _ = scan_sent_batch(Reader(_batch(messages)))
    assert isinstance(sent, SentMessages)
    assert sent._decoded is None  # the send path reads only the summary
    assert (len(sent), origin_range(sent), empty_payload(sent)) == (5, (1_000, 1_040), False)
    assert sent._decoded is None
    assert sent[2].payload == b"p2" and list(sent) == list(messages)
    assert sent._decoded is not None


def test_deltas_other_than_0_to_n_cannot_be_stored_as_sent() -> None:
    messages = (Message(id=1, payload=b"a", origin_timestamp=5),) * 3
    _, in_order = scan_sent_batch(Reader(_batch(messages, [0, 2, 3])))
    assert not in_order


def test_bad_user_headers_are_refused_though_not_kept() -> None:
    header = Header(
        key=HeaderValue(kind=HeaderKind.STRING, value=b"k"),
        value=HeaderValue(kind=HeaderKind.STRING, value=b"v"),
    )
    data = bytearray(_batch((Message(id=1, payload=b"x", headers=(header,)),)))
    data[256 + 48 + 1] = 0  # the key's kind, after the 1-byte payload: 0 is no kind
    with pytest.raises(RemoteProtocolError, match="header key kind 0"):
        scan_sent_batch(Reader(bytes(data)))


@pytest.mark.parametrize(
    ("at", "status"),
    [(256 + 60, Status.INVALID_MESSAGE_CHECKSUM), (40, Status.INVALID_BATCH_CHECKSUM)],
)
def test_checksums_are_checked(at: int, status: Status) -> None:
    messages = tuple(Message(id=i + 1, payload=bytes(20), origin_timestamp=7) for i in range(3))
    data = bytearray(_batch(messages))
    data[at] ^= 1
    with pytest.raises(RemoteProtocolError) as info:
        scan_sent_batch(Reader(bytes(data)))
    assert info.value.hint == status
