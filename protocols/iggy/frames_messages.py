"""Sending and polling messages (iggy.md §5.6, §6; era B §9.2, era A §9.3).

One ``Message`` class serves every era: what a producer sets (id, payload, headers, origin
timestamp) and what a poll returns (offset, append timestamp, checksum, era A's state).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .headers import Header
from .identifiers import Consumer, Identifier, Partitioning, PollingStrategy

__all__ = [
    "FlushUnsavedBuffer",
    "Message",
    "PollMessages",
    "PolledMessages",
    "SendMessages",
    "SendMessagesConfirmation",
    "SendMessagesResponse",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    id: int  # u128; 0 = the server assigns one (eras A/B; a VSR client always sets it)
    payload: bytes
    headers: tuple[Header, ...] = ()
    offset: int = 0
    timestamp: int = 0  # µs; the append time, shared by a whole batch in era C
    origin_timestamp: int = 0  # µs; set by the producer (eras B/C)
    # As received. Era C checksums are always recomputed when encoding (XXH3 of the frame,
    # §6.1); eras A/B carry the field as is.
    checksum: int = 0
    state: int = 1  # era A poll replies: 1 Available, 10 Unavailable, 20 Poisoned, 30 Deleted


# --- requests ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class SendMessages:
    stream_id: Identifier
    topic_id: Identifier
    partitioning: Partitioning
    # A tuple, or as decoded from era C a ``sent_batch.SentMessages`` (checked, decoded on use).
    messages: Sequence[Message]
    # Era C, as decoded: the batch exactly as the producer sent it (256-byte header + frames,
    # checksums verified) when its offset deltas are 0, 1, 2, ... (what every SDK sends), so a
    # server can store it as is; b"" otherwise. Encoding sends it as is when set (a client
    # forwarding a producer's batch), instead of encoding ``messages``.
    batch: bytes = field(default=b"", compare=False, repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class PollMessages:
    consumer: Consumer
    stream_id: Identifier
    topic_id: Identifier
    partition_id: int | None  # era A: always a number (1-based there)
    strategy: PollingStrategy
    count: int
    auto_commit: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class FlushUnsavedBuffer:
    stream_id: Identifier
    topic_id: Identifier
    partition_id: int
    fsync: bool


# --- replies ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class SendMessagesConfirmation:
    stream_id: int
    topic_id: int
    partition_id: int
    base_offset: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SendMessagesResponse:
    """Send exactly one confirmation (§6.1). Eras A/B reply with an empty body: there this
    encodes to nothing."""

    confirmations: tuple[SendMessagesConfirmation, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class PolledMessages:
    """Never an empty body: an empty poll is ``PolledMessages(..., messages=())`` (§6.3).
    ``partition_id`` 0xFFFFFFFF with no messages makes a VSR group consumer re-sync (§5.8)."""

    partition_id: int
    current_offset: int
    messages: tuple[Message, ...] = ()
    # Era C only: batches already encoded (e.g. by ``restamp_pieces``: a header and a view of
    # the stored frames), their pieces sent one after the other after ``messages``;
    # ``batches_count`` is how many messages they hold. Decoding fills ``messages`` only.
    batches: tuple[bytes | memoryview, ...] = field(default=(), compare=False, repr=False)
    batches_count: int = 0
