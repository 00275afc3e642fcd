"""Kafka records, errors and configs <-> the canonical model (DESIGN.md §3, kafka.md §3, §6).

Pure functions. Produce batches become ``WireBatch(format="kafka")`` after their headers and CRC
are checked, without decoding a record: a backend that stores the format keeps them as-is and
Fetch sends them back with only the base offset stamped. Batches of any other format are decoded
to ``Message``s and encoded as Kafka batches (the canonical path, e.g. Rog in, Kafka out).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta

from crc32c import crc32c
from kio.schema.errors import ErrorCode

from gateway.model import (
    BackendUnavailable,
    CorruptMessage,
    GatewayError,
    GroupNotEmpty,
    Header,
    HeaderKind,
    IllegalGeneration,
    InconsistentGroupProtocol,
    InvalidPartitions,
    InvalidRequest,
    InvalidSessionTimeout,
    MemberIdRequired,
    Message,
    MessageBatch,
    MessageTooLarge,
    NotFound,
    OffsetOutOfRange,
    ProducerFenced,
    RebalanceInProgress,
    SequenceError,
    Timeout,
    TopicConfig,
    TopicExists,
    Unauthorized,
    UnknownGroup,
    UnknownMember,
    Unsupported,
    WireBatch,
    register_wire_format,
)
from protocols._wire import I64_BE, RemoteProtocolError
from protocols.kafka import (
    Compression,
    Record,
    RecordBatchHeader,
    decode_records,
    encode_batch,
    iter_batches,
)

PROTOCOL = "kafka"
WIRE_FORMAT = "kafka"
_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")


# --- errors (kafka.md §6) ----------------------------------------------------------------------

_GROUP_ERRORS: tuple[tuple[type[GatewayError], ErrorCode], ...] = (
    (MemberIdRequired, ErrorCode.member_id_required),
    (RebalanceInProgress, ErrorCode.rebalance_in_progress),
    (IllegalGeneration, ErrorCode.illegal_generation),
    (UnknownMember, ErrorCode.unknown_member_id),
    (InconsistentGroupProtocol, ErrorCode.inconsistent_group_protocol),
    (InvalidSessionTimeout, ErrorCode.invalid_session_timeout),
    (GroupNotEmpty, ErrorCode.non_empty_group),
    (UnknownGroup, ErrorCode.group_id_not_found),
)
_ERRORS: tuple[tuple[type[GatewayError], ErrorCode], ...] = (
    *_GROUP_ERRORS,
    (TopicExists, ErrorCode.topic_already_exists),
    (InvalidPartitions, ErrorCode.invalid_partitions),
    (CorruptMessage, ErrorCode.corrupt_message),
    (MessageTooLarge, ErrorCode.message_too_large),
    (OffsetOutOfRange, ErrorCode.offset_out_of_range),
    (ProducerFenced, ErrorCode.invalid_producer_epoch),
    (SequenceError, ErrorCode.out_of_order_sequence_number),
    (NotFound, ErrorCode.unknown_topic_or_partition),
    (Timeout, ErrorCode.request_timed_out),
    (Unauthorized, ErrorCode.sasl_authentication_failed),
    (InvalidRequest, ErrorCode.invalid_request),
    (Unsupported, ErrorCode.invalid_request),
)


def error_code(exc: GatewayError, *, group: bool = False) -> ErrorCode:
    """The Kafka error for a failed command; ``group`` = it came from a coordinator API, where an
    unavailable backend means "find the coordinator again" rather than "refresh metadata"."""
    if isinstance(exc, BackendUnavailable):
        return ErrorCode.coordinator_not_available if group else ErrorCode.not_leader_or_follower
    for cls, code in _ERRORS:
        if isinstance(exc, cls):
            return code
    return ErrorCode.unknown_server_error


def millis(value: timedelta | int) -> int:
    """A kio duration field (``timedelta``) as the milliseconds Kafka sent."""
    return int(value.total_seconds() * 1000) if isinstance(value, timedelta) else int(value)


def check_topic_name(name: str) -> None:
    """Kafka's legal topic names (``Topic.validate``); others get INVALID_TOPIC_EXCEPTION."""
    if not _TOPIC_NAME.fullmatch(name) or name in (".", ".."):
        raise InvalidTopicName(f"illegal Kafka topic name {name!r}")


class InvalidTopicName(InvalidRequest):
    pass


# --- produce: one batch per partition, stored as it came (kafka.md §3.3) ------------------------


def produce_batch(
    records: bytes | None, *, max_batch_size: int
) -> tuple[WireBatch, RecordBatchHeader]:
    """Check a Produce ``records`` field and wrap it for the store; raises CorruptMessage,
    InvalidRecord (InvalidRequest) or MessageTooLarge."""
    if not records:
        raise InvalidRequest("a produce request with no records")
    try:
        walker = iter_batches(records, max_batch_size=max_batch_size)
        batches = list(walker)
    except RemoteProtocolError as exc:
        if exc.hint == ErrorCode.message_too_large:
            raise MessageTooLarge(str(exc)) from None
        raise CorruptMessage(str(exc)) from None
    if walker.truncated or len(batches) != 1:
        # Produce v3+ carries exactly one batch per partition (LogValidator).
        raise CorruptMessage(
            f"expected one whole record batch, got {len(batches)}"
            + (f" and {len(walker.truncated)} trailing bytes" if walker.truncated else "")
        )
    header, view = batches[0]
    if crc32c(view[21:]) != header.crc:
        raise CorruptMessage("record batch CRC mismatch")
    if header.records_count <= 0 or header.last_offset_delta != header.records_count - 1:
        raise CorruptMessage(
            f"batch of {header.records_count} records with lastOffsetDelta "
            f"{header.last_offset_delta}"
        )
    if header.is_control:
        raise InvalidRequest("producers may not write control batches")
    first, last = header.base_timestamp, header.max_timestamp
    wire = WireBatch(
        format=WIRE_FORMAT,
        data=records,
        count=header.records_count,
        first_timestamp_us=first * 1000 if first >= 0 else 0,
        max_timestamp_us=last * 1000 if last >= 0 else 0,
    )
    return wire, header


# --- records <-> messages -------------------------------------------------------------------------


def _header_of(name: str, value: bytes | None) -> Header:
    return Header(name, b"", HeaderKind.NULL) if value is None else Header(name, value)


def decode_wire(wire: WireBatch) -> list[Message]:
    """The ``kafka`` wire format's decoder for other protocols' readers (control records and
    transaction markers are not messages and are left out)."""
    out: list[Message] = []
    for header, view in iter_batches(wire.data):
        if header.is_control:
            continue
        base = wire.base_offset + (header.base_offset - _first_base(wire.data))
        for r in decode_records(header, view):
            ts = header.timestamp_of(r)
            out.append(
                Message(
                    r.value if r.value is not None else b"",
                    r.key,
                    tuple(_header_of(k, v) for k, v in r.headers),
                    ts * 1000 if ts >= 0 else 0,
                    base + r.offset_delta,
                )
            )
    return out


def _first_base(data: bytes) -> int:
    return int(I64_BE.unpack_from(data, 0)[0])


register_wire_format(WIRE_FORMAT, decode_wire)


def _header_value(h: Header) -> bytes | None:
    return None if h.kind == HeaderKind.NULL else h.value


def encode_messages(messages: Sequence[Message]) -> bytes:
    """Messages of another format as one Kafka batch (offsets and timestamps kept)."""
    base_offset = messages[0].offset
    base_ts = min(m.timestamp_us for m in messages) // 1000
    records = [
        Record(
            offset_delta=m.offset - base_offset,
            timestamp_delta=m.timestamp_us // 1000 - base_ts,
            key=m.key,
            value=m.value,
            headers=tuple((h.name, _header_value(h)) for h in m.headers),
        )
        for m in messages
    ]
    return encode_batch(
        records,
        base_offset=base_offset,
        base_timestamp_ms=base_ts,
        last_offset_delta=messages[-1].offset - base_offset,
        compression=Compression.NONE,
    )


def fetch_records(batches: Iterable[MessageBatch], max_bytes: int) -> list[bytes | memoryview]:
    """Record-batch pieces for a Fetch response. Stored Kafka batches go out untouched apart from
    the 8-byte base offset in front; at least one batch is always sent (KIP-74)."""
    pieces: list[bytes | memoryview] = []
    size = 0
    for batch in batches:
        wire = batch.wire
        if wire is not None and wire.format == WIRE_FORMAT:
            data = memoryview(wire.data)
            n = len(data)
            if pieces and size + n > max_bytes:
                break
            pieces += (I64_BE.pack(wire.base_offset), data[8:])
        else:
            encoded = encode_messages(batch.messages)
            n = len(encoded)
            if pieces and size + n > max_bytes:
                break
            pieces.append(encoded)
        size += n
    return pieces


# --- topic configs (DescribeConfigs / CreateTopics) ----------------------------------------------

_CONFIG_FIELDS = {
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "segment.bytes": "segment_bytes",
    "max.message.bytes": "max_message_bytes",
}
# What DescribeConfigs reports when the topic leaves a setting to the backend (Kafka's defaults).
CONFIG_DEFAULTS: Mapping[str, str] = {
    "cleanup.policy": "delete",
    "compression.type": "producer",
    "max.message.bytes": "1048588",
    "message.timestamp.type": "CreateTime",
    "retention.bytes": "-1",
    "retention.ms": "604800000",
    "segment.bytes": "1073741824",
}


def topic_config(configs: Iterable[tuple[str, str | None]]) -> TopicConfig:
    known: dict[str, int | str | None] = {}
    extra: dict[str, str] = {}
    for name, value in configs:
        if value is None:
            continue
        field = _CONFIG_FIELDS.get(name)
        if field is not None:
            try:
                known[field] = int(value)
            except ValueError:
                raise InvalidRequest(f"config {name} must be an integer, not {value!r}") from None
        elif name == "compression.type":
            known["compression"] = value
        else:
            extra[name] = value
    return TopicConfig(**known, extra=extra)  # type: ignore[arg-type]


def config_entries(config: TopicConfig) -> dict[str, tuple[str, bool]]:
    """name -> (value, is_default) for every config DescribeConfigs lists."""
    out = {name: (value, True) for name, value in CONFIG_DEFAULTS.items()}
    for name, field in _CONFIG_FIELDS.items():
        value = getattr(config, field)
        if value is not None:
            out[name] = (str(value), False)
    if config.compression is not None:
        out["compression.type"] = (config.compression, False)
    for name, value in config.extra.items():
        out[name] = (value, False)
    return out


__all__ = [
    "CONFIG_DEFAULTS",
    "PROTOCOL",
    "WIRE_FORMAT",
    "InvalidTopicName",
    "check_topic_name",
    "config_entries",
    "decode_wire",
    "encode_messages",
    "error_code",
    "fetch_records",
    "millis",
    "produce_batch",
    "topic_config",
]
