"""Payload layouts of SendMessages, PollMessages and FlushUnsavedBuffer (iggy.md §5.6, §6,
§9.2, §9.3). The message layouts themselves are in ``batch``."""

from __future__ import annotations

from typing import Any, Final, NamedTuple

from protocols._wire import LocalProtocolError

from .batch import (
    BATCH_HEADER_SIZE,
    LEGACY_HEADER_SIZE,
    decode_batch,
    decode_era_a_polled,
    decode_era_a_sent,
    decode_era_b_message,
    encode_batch,
    encode_era_a_polled,
    encode_era_a_sent,
    encode_era_b_message,
    encode_polled,
)
from .codes import Era
from .frames_messages import (
    FlushUnsavedBuffer,
    Message,
    PolledMessages,
    PollMessages,
    SendMessages,
    SendMessagesConfirmation,
    SendMessagesResponse,
)
from .identifiers import (
    Identifier,
    Partitioning,
    decode_identifier,
    decode_partitioning,
    encode_identifier,
    encode_partitioning,
)
from .layout import (
    CONSUMER,
    FLAG,
    IDENT,
    PARTITION,
    STRATEGY,
    U32,
    U64,
    VSR,
    Field,
    Kind,
    Layout,
    ListOf,
)
from .sent_batch import scan_sent_batch
from .status import Status
from .wire import Reader, malformed, pack_u32, pack_u64

__all__ = ["LAYOUTS", "SPLIT_SEND_FROM", "SentParts", "decode_sent_parts", "polled_pieces"]

# A SendMessages body this big is taken in two parts (``SentParts``).
SPLIT_SEND_FROM: Final = 65536


class SentParts(NamedTuple):
    """A big SendMessages body as the server codec takes it: what comes before the batch
    (``[metadata_length u32][stream][topic][Partitioning][count u32]``), then the batch, each
    as it was read. Read as a connection reads after a big frame (exactly what the codec asks
    for each time), the batch is one read, decoded and stored as that very bytes object,
    where cutting it out of the whole body copied it."""

    metadata: bytes
    batch: bytes

    def joined(self) -> bytes:
        return self.metadata + self.batch


class _SendMessagesKind:
    """Era C: ``[metadata_length u32][stream][topic][Partitioning][count u32]`` + one batch.
    Era B: the same prefix, an index of ``(0, cumulative end u32, 0 u64)`` per message, then
    64-byte headers. Era A: ``[stream][topic][Partitioning]`` and messages to the end."""

    def encode(self, value: SendMessages, era: Era, /) -> bytes:
        ids = encode_identifier(value.stream_id) + encode_identifier(value.topic_id)
        ids += encode_partitioning(value.partitioning)
        if era is Era.A:
            return ids + b"".join(encode_era_a_sent(m) for m in value.messages)
        if era is Era.C and value.batch:
            # A producer's batch forwarded as it came (a client relaying it, the gateway's fast
            # path): its own count, nothing re-encoded.
            if len(value.batch) < BATCH_HEADER_SIZE:
                raise LocalProtocolError("a forwarded batch is shorter than its 256-byte header")
            count = value.batch[48:52]
            return pack_u32(len(ids) + 4) + ids + count + value.batch
        count = pack_u32(len(value.messages), "messages count")
        prefix = pack_u32(len(ids) + 4) + ids + count  # metadata_length counts the count too
        if era is Era.C:
            # What the producer sends: no stamps, deltas 0, 1, 2, ... (§6.1).
            n = len(value.messages)
            batch = encode_batch(
                value.messages,
                partition_id=0,
                base_offset=0,
                base_timestamp=0,
                offset_deltas=range(n),
            )
            return prefix + batch
        frames = [encode_era_b_message(m) for m in value.messages]
        index = []
        end = 0
        for frame in frames:
            end += len(frame)
            index.append(bytes(4) + pack_u32(end, "index position") + bytes(8))
        return prefix + b"".join(index) + b"".join(frames)

    def decode(self, reader: Reader, era: Era, /) -> SendMessages:
        if era is Era.A:
            stream_id, topic_id = decode_identifier(reader), decode_identifier(reader)
            partitioning = decode_partitioning(reader)
            messages = []
            while not reader.at_end():
                messages.append(decode_era_a_sent(reader))
            return SendMessages(
                stream_id=stream_id,
                topic_id=topic_id,
                partitioning=partitioning,
                messages=tuple(messages),
            )
        stream_id, topic_id, partitioning, count = _metadata(reader)
        if era is Era.C:
            return _era_c(reader, stream_id, topic_id, partitioning, count)
        if count * (16 + LEGACY_HEADER_SIZE) > reader.remaining:
            malformed(f"{count} messages do not fit the body", Status.INVALID_MESSAGES_COUNT)
        ends = []
        for _ in range(count):
            reader.take(4, "index offset")
            ends.append(reader.u32("index position"))
            reader.take(8, "index timestamp")
        base = reader.pos
        messages = []
        for end in ends:
            messages.append(decode_era_b_message(reader))
            if reader.pos - base != end:
                malformed(f"the index says a message ends at {end}, not {reader.pos - base}")
        return SendMessages(
            stream_id=stream_id,
            topic_id=topic_id,
            partitioning=partitioning,
            messages=tuple(messages),
        )


def _metadata(reader: Reader) -> tuple[Identifier, Identifier, Partitioning, int]:
    """``[metadata_length u32][stream][topic][Partitioning][count u32]`` (eras B and C)."""
    metadata_length = reader.u32("metadata length")
    start = reader.pos
    stream_id, topic_id = decode_identifier(reader), decode_identifier(reader)
    partitioning = decode_partitioning(reader)
    count = reader.u32("messages count")
    if reader.pos - start != metadata_length:
        malformed(f"metadata length {metadata_length} but {reader.pos - start} bytes of it")
    return stream_id, topic_id, partitioning, count


def _era_c(
    reader: Reader,
    stream_id: Identifier,
    topic_id: Identifier,
    partitioning: Partitioning,
    count: int,
) -> SendMessages:
    # Only the ids, payloads, headers and origin timestamps mean anything from a producer; the
    # checksums are checked (4027/4039, as the real server) and dropped.
    sent, in_order = scan_sent_batch(reader)
    if len(sent) != count:
        malformed(
            f"{count} messages announced, {len(sent)} in the batch",
            Status.INVALID_MESSAGES_COUNT,
        )
    reader.expect_end("batch")
    return SendMessages(
        stream_id=stream_id,
        topic_id=topic_id,
        partitioning=partitioning,
        messages=sent,
        # Deltas other than 0..n-1 could not be served as stored: no batch then.
        batch=sent.batch if in_order else b"",
    )


def decode_sent_parts(metadata: bytes, batch: bytes) -> SendMessages:
    """An era C SendMessages body taken in two parts (a codec's split of a big one): what comes
    before the batch, and the batch. The batch read as one chunk is kept as it came: the
    ``SendMessages.batch`` stored is that very bytes object, where slicing it out of the whole
    body copied it. Raises as ``decode`` would, though its message may differ for a body
    whose metadata is wrong (a codec that must answer as ``decode`` decodes the body whole
    then)."""
    reader = Reader(metadata)
    stream_id, topic_id, partitioning, count = _metadata(reader)
    reader.expect_end("metadata")
    return _era_c(Reader(batch), stream_id, topic_id, partitioning, count)


def polled_pieces(value: PolledMessages, era: Era) -> list[bytes | memoryview]:
    """A PolledMessages body in the pieces it is made of: the stored batches it carries
    (``batches``) are not copied into one ``bytes``."""
    head = pack_u32(value.partition_id, "partition id") + pack_u64(value.current_offset)
    if value.batches and era is not Era.C:
        raise LocalProtocolError("pre-encoded batches exist in era C only")
    head += pack_u32(len(value.messages) + value.batches_count, "messages count")
    if era is Era.A:
        return [head, *(encode_era_a_polled(m) for m in value.messages)]
    if era is Era.B:
        return [head, *(encode_era_b_message(m) for m in value.messages)]
    return [head, *encode_polled(value.messages, value.partition_id), *value.batches]


class _PolledMessagesKind:
    """``[partition_id u32][current_offset u64][count u32]`` (always there, §6.3), then
    batches (era C), 64-byte-header messages (era B) or era A messages."""

    def encode(self, value: PolledMessages, era: Era, /) -> bytes:
        return b"".join(polled_pieces(value, era))

    def decode(self, reader: Reader, era: Era, /) -> PolledMessages:
        partition_id = reader.u32("partition id")
        current_offset = reader.u64("current offset")
        count = reader.u32("messages count")
        messages: list[Message] = []
        if era is Era.C:
            while not reader.at_end():
                if reader.remaining < BATCH_HEADER_SIZE:
                    malformed(f"{reader.remaining} bytes left: not a batch")
                messages += decode_batch(reader, verify=False)  # the client never checks (§6.3)
        else:
            decode_one = decode_era_a_polled if era is Era.A else decode_era_b_message
            while not reader.at_end():
                messages.append(decode_one(reader))
        if len(messages) != count:
            malformed(f"{count} messages announced, {len(messages)} sent")
        return PolledMessages(
            partition_id=partition_id, current_offset=current_offset, messages=tuple(messages)
        )


_CONFIRMATION = Layout(
    SendMessagesConfirmation,
    Field("stream_id", U32),
    Field("topic_id", U32),
    Field("partition_id", U32),
    Field("base_offset", U64),
)

LAYOUTS: Final[dict[type[Any], Kind]] = {
    SendMessages: _SendMessagesKind(),
    PollMessages: Layout(
        PollMessages,
        Field("consumer", CONSUMER),
        Field("stream_id", IDENT),
        Field("topic_id", IDENT),
        Field("partition_id", PARTITION),
        Field("strategy", STRATEGY),
        Field("count", U32),
        Field("auto_commit", FLAG),
    ),
    FlushUnsavedBuffer: Layout(
        FlushUnsavedBuffer,
        Field("stream_id", IDENT),
        Field("topic_id", IDENT),
        Field("partition_id", U32),
        Field("fsync", FLAG),
    ),
    PolledMessages: _PolledMessagesKind(),
    SendMessagesResponse: Layout(
        SendMessagesResponse, Field("confirmations", ListOf(_CONFIRMATION, "u32"), VSR)
    ),
}
