"""Identifiers, consumers, partitioning and polling strategies (iggy.md §2, §4).

An ``Identifier`` is a plain ``int`` (kind 1, numeric u32) or ``str`` (kind 2, a name of 1..255
UTF-8 bytes), so the kind survives a round trip: ``"7"`` stays a string identifier.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import TypeAlias

from protocols._wire import LocalProtocolError

from .codes import Era
from .status import Status
from .wire import Reader, malformed, pack_name, pack_u8, pack_u32, pack_u64, utf8

__all__ = [
    "Balanced",
    "Consumer",
    "ConsumerKind",
    "Identifier",
    "MessagesKey",
    "PartitionId",
    "Partitioning",
    "PollingKind",
    "PollingStrategy",
    "decode_consumer",
    "decode_identifier",
    "decode_partition",
    "decode_partitioning",
    "decode_polling_strategy",
    "encode_consumer",
    "encode_identifier",
    "encode_partition",
    "encode_partitioning",
    "encode_polling_strategy",
]

Identifier: TypeAlias = int | str

_NUMERIC = 1
_STRING = 2


def encode_identifier(value: Identifier) -> bytes:
    if isinstance(value, str):
        return pack_u8(_STRING) + pack_name(value, "identifier")
    if isinstance(value, bool) or not isinstance(value, int):
        raise LocalProtocolError(f"identifier {value!r} is neither an int nor a str")
    return bytes((_NUMERIC, 4)) + pack_u32(value, "numeric identifier")


def decode_identifier(reader: Reader, what: str = "identifier") -> Identifier:
    kind = reader.u8(f"{what} kind")
    size = reader.u8(f"{what} length")
    if kind == _NUMERIC:
        if size != 4:
            malformed(f"numeric {what} of {size} bytes", Status.INVALID_IDENTIFIER)
        return reader.u32(what)
    if kind == _STRING:
        if size == 0:
            malformed(f"empty string {what}", Status.INVALID_IDENTIFIER)
        return utf8(reader.take(size, what), what)
    malformed(f"{what} kind {kind} is neither 1 nor 2", Status.INVALID_IDENTIFIER)


class ConsumerKind(IntEnum):
    CONSUMER = 1
    CONSUMER_GROUP = 2


@dataclass(frozen=True, slots=True, kw_only=True)
class Consumer:
    """``[kind u8][Identifier]``: a single consumer or a consumer group (§2)."""

    kind: ConsumerKind
    id: Identifier


def encode_consumer(consumer: Consumer) -> bytes:
    return pack_u8(consumer.kind, "consumer kind") + encode_identifier(consumer.id)


def decode_consumer(reader: Reader) -> Consumer:
    kind = reader.u8("consumer kind")
    if kind not in (ConsumerKind.CONSUMER, ConsumerKind.CONSUMER_GROUP):
        malformed(f"consumer kind {kind} is neither 1 nor 2")
    return Consumer(kind=ConsumerKind(kind), id=decode_identifier(reader, "consumer id"))


# --- partitioning: [kind u8][len u8][value] ---------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Balanced:
    """Kind 1: the server picks (legacy era); a VSR client resolves it itself (§0.7)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionId:
    """Kind 2: an explicit partition, 0-based from era B on, 1-based in era A (§7)."""

    id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class MessagesKey:
    """Kind 3: 1..255 raw key bytes; partition = XxHash32(key) % partitions (§2)."""

    key: bytes


Partitioning: TypeAlias = Balanced | PartitionId | MessagesKey


def encode_partitioning(partitioning: Partitioning) -> bytes:
    if isinstance(partitioning, Balanced):
        return b"\x01\x00"
    if isinstance(partitioning, PartitionId):
        return b"\x02\x04" + pack_u32(partitioning.id, "partition id")
    if not 1 <= len(partitioning.key) <= 255:
        raise LocalProtocolError(f"messages key of {len(partitioning.key)} bytes; 1..255 fit")
    return b"\x03" + pack_u8(len(partitioning.key)) + partitioning.key


def decode_partitioning(reader: Reader) -> Partitioning:
    kind = reader.u8("partitioning kind")
    size = reader.u8("partitioning length")
    if kind == 1 and size == 0:
        return Balanced()
    if kind == 2 and size == 4:
        return PartitionId(id=reader.u32("partition id"))
    if kind == 3 and size > 0:
        return MessagesKey(key=reader.take(size, "messages key"))
    malformed(f"partitioning kind {kind} with a {size}-byte value")


# --- polling strategy: [kind u8][value u64], always 9 bytes ------------------------------------


class PollingKind(IntEnum):
    OFFSET = 1
    TIMESTAMP = 2  # value = microseconds since the epoch
    FIRST = 3
    LAST = 4
    NEXT = 5


@dataclass(frozen=True, slots=True, kw_only=True)
class PollingStrategy:
    kind: PollingKind
    value: int = 0  # 0 for FIRST, LAST and NEXT


def encode_polling_strategy(strategy: PollingStrategy) -> bytes:
    return pack_u8(strategy.kind, "polling kind") + pack_u64(strategy.value, "polling value")


def decode_polling_strategy(reader: Reader) -> PollingStrategy:
    kind = reader.u8("polling kind")
    if not PollingKind.OFFSET <= kind <= PollingKind.NEXT:
        malformed(f"polling kind {kind} is not 1..5")
    return PollingStrategy(kind=PollingKind(kind), value=reader.u64("polling value"))


# --- the partition of poll and offset requests ------------------------------------------------


def encode_partition(partition_id: int | None, era: Era) -> bytes:
    """Era B/C: ``OptPartition`` = ``[flag u8][id u32]`` (id 0 when absent, §2). Era A: a bare
    u32 with no flag (§9.3), where None is sent as 0."""
    if era is Era.A:
        return pack_u32(partition_id or 0, "partition id")
    if partition_id is None:
        return bytes(5)
    return b"\x01" + pack_u32(partition_id, "partition id")


def decode_partition(reader: Reader, era: Era) -> int | None:
    if era is Era.A:
        return reader.u32("partition id")
    present = reader.flag("partition flag")
    value = reader.u32("partition id")
    return value if present else None
