"""Embedded specifics of append and read: stored batches go out undecoded, stamping, limits."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.backends.embedded import EmbeddedBackend, batch_codec, open_embedded
from gateway.model import (
    Append,
    BackendUnavailable,
    CorruptMessage,
    Header,
    HeaderKind,
    Message,
    MessageBatch,
    MessageTooLarge,
    Read,
    WireBatch,
)

from .support import TOPIC, append, batch, create


class Clock:
    def __call__(self) -> float:
        return 1_700_000_000.5


def _wire(messages: list[Message], **kw: int) -> MessageBatch:
    data = batch_codec.encode(messages)
    return MessageBatch(
        wire=WireBatch(format=batch_codec.FORMAT, data=data, count=len(messages), **kw)
    )


async def test_reads_return_stored_batches_undecoded(tmp_path: Path) -> None:
    with trio.fail_after(10):
        async with open_embedded(tmp_path, fsync="never") as b:
            await create(b)
            await append(b, batch(10))
            await append(b, batch(10, start=10))
            r = await b.read(Read(topic=TOPIC, partition=0, offset=0))
            assert [x.decoded for x in r.batches] == [False, False]
            assert [(x.wire.base_offset, x.wire.count) for x in r.batches if x.wire] == [
                (0, 10),
                (10, 10),
            ]
            # Inside a batch: trimmed (decoded) unless the reader takes whole batches.
            r = await b.read(Read(topic=TOPIC, partition=0, offset=5))
            assert r.batches[0].decoded and r.batches[0].messages[0].offset == 5
            assert not r.batches[1].decoded
            r = await b.read(Read(topic=TOPIC, partition=0, offset=5, whole_batches=True))
            assert [x.decoded for x in r.batches] == [False, False]
            assert r.batches[0].base_offset == 0


async def test_append_time_stamps_unset_timestamps(tmp_path: Path) -> None:
    now = 1_700_000_000_500_000
    with trio.fail_after(10):
        async with open_embedded(tmp_path, fsync="never", clock=Clock()) as b:
            await create(b)
            await append(b, batch(3))  # all unset
            await append(b, [Message(value=b"a", timestamp_us=5), Message(value=b"b")])  # mixed
            await b.append(Append(topic=TOPIC, partition=0, batch=_wire(batch(2))))  # wire, unset
            r = await b.read(Read(topic=TOPIC, partition=0, offset=0))
            stamps = [m.timestamp_us for x in r.batches for m in x.messages]
            assert stamps == [now, now, now, 5, now, now, now]
            assert [
                (x.wire.first_timestamp_us, x.wire.max_timestamp_us) for x in r.batches if x.wire
            ] == [(now, now), (5, now), (now, now)]


async def test_limits(tmp_path: Path) -> None:
    with trio.fail_after(10):
        async with open_embedded(tmp_path, fsync="never", max_message_bytes=100) as b:
            assert b.capabilities.max_message_bytes == 100
            await create(b)
            with pytest.raises(MessageTooLarge):
                await append(b, [Message(value=b"x" * 101)])
            with pytest.raises(MessageTooLarge):  # key and headers count too
                await append(b, [Message(value=b"x" * 60, key=b"k" * 41)])
            with pytest.raises(MessageTooLarge):
                await b.append(Append(topic=TOPIC, partition=0, batch=_wire(batch(1, size=200))))
            await append(b, batch(50, size=90))  # a big batch of small messages is fine
            bad = WireBatch(format=batch_codec.FORMAT, data=batch_codec.encode(batch(2)), count=3)
            with pytest.raises(CorruptMessage):
                await b.append(Append(topic=TOPIC, partition=0, batch=MessageBatch(wire=bad)))


async def test_ping_only_while_open(tmp_path: Path) -> None:
    backend = EmbeddedBackend(tmp_path)
    with pytest.raises(BackendUnavailable):
        await backend.ping()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(backend.run)
            await backend.ping()
            nursery.cancel_scope.cancel()
    with pytest.raises(BackendUnavailable):
        await backend.ping()
    with pytest.raises(BackendUnavailable):
        await create(backend)


_messages = st.lists(
    st.builds(
        Message,
        value=st.binary(max_size=300),
        key=st.none() | st.binary(max_size=20),
        headers=st.lists(
            st.builds(
                Header, st.text(max_size=8), st.binary(max_size=8), st.sampled_from(HeaderKind)
            ),
            max_size=3,
        ).map(tuple),
        timestamp_us=st.integers(0, 2**62),
        id=st.integers(0, 2**128 - 1),
    ),
    min_size=1,
    max_size=20,
)


@settings(max_examples=40, deadline=None)
@given(
    batches=st.lists(_messages, min_size=1, max_size=8),
    segment_bytes=st.sampled_from([300, 2000, 1 << 20]),
    start=st.integers(0, 50),
    max_bytes=st.integers(1, 5000),
    max_messages=st.integers(1, 200),
)
async def test_whatever_goes_in_comes_out(
    batches: list[list[Message]], segment_bytes: int, start: int, max_bytes: int, max_messages: int
) -> None:
    sent = [m for b in batches for m in b]
    start = min(start, len(sent) - 1)
    with tempfile.TemporaryDirectory() as root, trio.fail_after(10):
        async with open_embedded(root, fsync="never", segment_bytes=segment_bytes) as b:
            await create(b)
            for messages in batches:
                await append(b, messages)
            r = await b.read(
                Read(
                    topic=TOPIC,
                    partition=0,
                    offset=start,
                    max_bytes=max_bytes,
                    max_messages=max_messages,
                )
            )
            got = [m for x in r.batches for m in x.messages]
            assert 1 <= len(got) <= max_messages
            assert [m.offset for m in got] == list(range(start, start + len(got)))
            for s, g in zip(sent[start:], got, strict=False):
                assert (g.value, g.key, g.headers, g.id) == (s.value, s.key, s.headers, s.id)
                assert g.timestamp_us == (s.timestamp_us or g.timestamp_us)
