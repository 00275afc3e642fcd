"""The ``kafka`` wire format: record batches <-> canonical messages, topic names and configs
(DESIGN.md §3, kafka.md §3, §6); the error table is ``gateway.translate.kafka.errors``.

Pure functions for both roles: the Kafka translator (server side) and the Kafka backend (client
side) import them from here, one layer below both, so that neither imports the other.

Carried fields: a Kafka record has no typed headers, no message id and only millisecond
timestamps. Where the gateway STORES canonical messages as Kafka records (the Kafka backend,
``encode_append``), what a record cannot hold is kept in trailing ``streamgate.*`` headers, and
only when there is something to keep (DESIGN.md §3, "kept in a header"):

- ``streamgate.header-kinds``: one byte per header before it, its ``HeaderKind`` (when any
  kind is neither RAW nor NULL; NULL is a Kafka null header value anyway);
- ``streamgate.timestamp-us``: the microseconds below the record's millisecond, u16 big-endian;
- ``streamgate.id``: the u128 message id, 16 bytes big-endian.

``decode_wire`` takes them back out whenever they are present and well formed, so Iggy -> Kafka
backend -> Iggy keeps every field; Kafka consumers reading such records see them as headers.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Final

from gateway.model import (
    Header,
    HeaderKind,
    InvalidRequest,
    Message,
    TopicConfig,
    WireBatch,
    WireFormat,
)
from gateway.translate.lossy import Lossy, ignore_lossy
from protocols._wire import I64_BE
from protocols.kafka import Compression, Record, decode_records, encode_batch, iter_batches

_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def millis(value: timedelta | int) -> int:
    """A kio duration field (``timedelta``) as the milliseconds Kafka sent."""
    return int(value.total_seconds() * 1000) if isinstance(value, timedelta) else int(value)


def check_topic_name(name: str) -> None:
    """Kafka's legal topic names (``Topic.validate``); others get INVALID_TOPIC_EXCEPTION."""
    if not _TOPIC_NAME.fullmatch(name) or name in (".", ".."):
        raise InvalidTopicName(f"illegal Kafka topic name {name!r}")


class InvalidTopicName(InvalidRequest):
    pass


# --- records <-> messages -------------------------------------------------------------------------

CARRIED_KINDS: Final = "streamgate.header-kinds"
CARRIED_MICROS: Final = "streamgate.timestamp-us"
CARRIED_ID: Final = "streamgate.id"
_CARRIED = frozenset((CARRIED_KINDS, CARRIED_MICROS, CARRIED_ID))
_KINDS = {k.value: k for k in HeaderKind}
_PLAIN_KINDS = frozenset((HeaderKind.RAW, HeaderKind.NULL))


def _header_of(name: str, value: bytes | None) -> Header:
    return Header(name, b"", HeaderKind.NULL) if value is None else Header(name, value)


def _carried(
    raw: tuple[tuple[str, bytes | None], ...], ts_us: int
) -> tuple[tuple[Header, ...], int, int]:
    """Headers, timestamp and id of a record whose last headers are ``streamgate.*`` carriers;
    anything malformed leaves every header as it came."""
    headers = list(raw)
    kinds: bytes | None = None
    micros = 0
    message_id = 0
    while headers and headers[-1][0] in _CARRIED:
        name, value = headers.pop()
        if value is None:
            return tuple(_header_of(k, v) for k, v in raw), ts_us, 0
        if name == CARRIED_KINDS:
            kinds = value
        elif name == CARRIED_MICROS and len(value) == 2:
            micros = int.from_bytes(value, "big")
        elif name == CARRIED_ID and len(value) == 16:
            message_id = int.from_bytes(value, "big")
        else:
            return tuple(_header_of(k, v) for k, v in raw), ts_us, 0
    if micros >= 1000 or (
        kinds is not None and (len(kinds) != len(headers) or any(k not in _KINDS for k in kinds))
    ):
        return tuple(_header_of(k, v) for k, v in raw), ts_us, 0
    if kinds is None:
        out = tuple(_header_of(k, v) for k, v in headers)
    else:
        out = tuple(
            Header(k, b"" if v is None else v, _KINDS[kind])
            for (k, v), kind in zip(headers, kinds, strict=True)
        )
    return out, ts_us + micros, message_id


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
            ts_us = ts * 1000 if ts >= 0 else 0
            message_id = 0
            if r.headers and r.headers[-1][0] in _CARRIED:
                headers, ts_us, message_id = _carried(r.headers, ts_us)
            else:
                headers = tuple(_header_of(k, v) for k, v in r.headers)
            value = r.value if r.value is not None else b""
            out.append(Message(value, r.key, headers, ts_us, base + r.offset_delta, message_id))
    return out


def _first_base(data: bytes) -> int:
    return int(I64_BE.unpack_from(data, 0)[0])


WIRE_FORMAT: Final = WireFormat(name="kafka", decode=decode_wire)


def control_batch(
    *, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int, now_us: int
) -> WireBatch:
    """A transaction marker as Kafka's coordinator has it written (KIP-98): one control batch
    (transactional and control bits set, base sequence -1) of one record, key ``int16 version
    0, int16 type`` (0 abort, 1 commit), value ``int16 version 0, int32 coordinator epoch``.
    Kafka clients skip it; readers stamp its offset as for any stored Kafka batch."""
    now_ms = now_us // 1000
    data = encode_batch(
        [
            Record(
                offset_delta=0,
                timestamp_delta=0,
                key=_MARKER_KEY.pack(0, 1 if commit else 0),
                value=_MARKER_VALUE.pack(0, coordinator_epoch),
            )
        ],
        base_timestamp_ms=now_ms,
        transactional=True,
        control=True,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
    )
    return WireBatch(
        format=WIRE_FORMAT,
        data=data,
        count=1,
        first_timestamp_us=now_ms * 1000,
        max_timestamp_us=now_ms * 1000,
    )


_MARKER_KEY: Final = struct.Struct(">hh")
_MARKER_VALUE: Final = struct.Struct(">hi")


def _header_value(h: Header) -> bytes | None:
    return None if h.kind == HeaderKind.NULL else h.value


def _record(m: Message, offset_delta: int, base_ts: int) -> Record:
    return Record(
        offset_delta=offset_delta,
        timestamp_delta=m.timestamp_us // 1000 - base_ts,
        key=m.key,
        value=m.value,
        headers=tuple((h.name, _header_value(h)) for h in m.headers),
    )


def _for_reader(m: Message, offset_delta: int, base_ts: int, lossy: Lossy) -> Record:
    """A record for a Kafka consumer: a message id as the ``streamgate.id`` header (DESIGN.md
    §3); header kinds and the sub-millisecond part of the time are dropped and counted."""
    record = _record(m, offset_delta, base_ts)
    if any(h.kind not in _PLAIN_KINDS for h in m.headers):
        lossy("headers")
    if m.timestamp_us % 1000:
        lossy("timestamp")
    if not m.id:
        return record
    return replace(record, headers=(*record.headers, (CARRIED_ID, m.id.to_bytes(16, "big"))))


def encode_messages(messages: Sequence[Message], lossy: Lossy = ignore_lossy) -> bytes:
    """Messages of another format as one Kafka batch for a consumer (offsets and timestamps
    kept; ids and what is lost as ``_for_reader`` says)."""
    base_offset = messages[0].offset
    base_ts = min(m.timestamp_us for m in messages) // 1000
    records = [_for_reader(m, m.offset - base_offset, base_ts, lossy) for m in messages]
    return encode_batch(
        records,
        base_offset=base_offset,
        base_timestamp_ms=base_ts,
        last_offset_delta=messages[-1].offset - base_offset,
        compression=Compression.NONE,
    )


def _carrying(m: Message, offset_delta: int, base_ts: int) -> Record:
    record = _record(m, offset_delta, base_ts)
    extra: list[tuple[str, bytes | None]] = []
    if any(h.kind not in _PLAIN_KINDS for h in m.headers):
        extra.append((CARRIED_KINDS, bytes(int(h.kind) for h in m.headers)))
    if m.timestamp_us % 1000:
        extra.append((CARRIED_MICROS, (m.timestamp_us % 1000).to_bytes(2, "big")))
    if m.id:
        extra.append((CARRIED_ID, m.id.to_bytes(16, "big")))
    if not extra:
        return record
    return Record(
        offset_delta=offset_delta,
        timestamp_delta=record.timestamp_delta,
        key=record.key,
        value=record.value,
        headers=record.headers + tuple(extra),
    )


def encode_append(messages: Sequence[Message], *, now_us: int) -> bytes:
    """Messages to append as one Kafka batch: offset deltas 0..n-1, unset timestamps stamped
    ``now_us`` to the millisecond (a time nobody gave needs no sub-millisecond carrier, which a
    plain Kafka consumer of the broker would see), and the fields a record cannot hold in
    ``streamgate.*`` headers (module doc)."""
    now_us -= now_us % 1000
    stamped = [m if m.timestamp_us else m._replace(timestamp_us=now_us) for m in messages]
    base_ts = min(m.timestamp_us for m in stamped) // 1000
    records = [_carrying(m, i, base_ts) for i, m in enumerate(stamped)]
    return encode_batch(records, base_timestamp_ms=base_ts, compression=Compression.NONE)


def record_size(m: Message) -> int:
    """About what one message costs in a batch, for Kafka's per-message size limit."""
    return len(m.value) + len(m.key or b"") + sum(len(h.name) + len(h.value) for h in m.headers)


# --- topic configs (DescribeConfigs / CreateTopics) ----------------------------------------------

_CONFIG_FIELDS = {
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "segment.bytes": "segment_bytes",
    "max.message.bytes": "max_message_bytes",
}
# What DescribeConfigs reports for settings every backend behind the gateway has: records are
# deleted, never compacted; batches keep the producer's compression and timestamps.
CONFIG_DEFAULTS: Mapping[str, str] = {
    "cleanup.policy": "delete",
    "compression.type": "producer",
    "message.timestamp.type": "CreateTime",
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


def config_entries(
    config: TopicConfig, defaults: TopicConfig | None = None
) -> dict[str, tuple[str, bool]]:
    """name -> (value, is_default) for every config DescribeConfigs lists: the topic's own
    settings, else what the backend applies (``TopicInfo.defaults``); a setting neither names
    is left out rather than answered with a value nothing keeps."""
    out = {name: (value, True) for name, value in CONFIG_DEFAULTS.items()}
    for name, field in _CONFIG_FIELDS.items():
        value = getattr(config, field)
        if value is not None:
            out[name] = (str(value), False)
        elif defaults is not None and (default := getattr(defaults, field)) is not None:
            out[name] = (str(default), True)
    if config.compression is not None:
        out["compression.type"] = (config.compression, False)
    for name, value in config.extra.items():
        out[name] = (value, False)
    return out


def config_settings(config: TopicConfig) -> dict[str, str]:
    """The configs a topic sets itself (CreateTopics / IncrementalAlterConfigs)."""
    return {name: value for name, (value, is_default) in config_entries(config).items()
            if not is_default}  # fmt: skip


__all__ = [
    "CARRIED_ID",
    "CARRIED_KINDS",
    "CARRIED_MICROS",
    "CONFIG_DEFAULTS",
    "WIRE_FORMAT",
    "InvalidTopicName",
    "check_topic_name",
    "config_entries",
    "config_settings",
    "control_batch",
    "decode_wire",
    "encode_append",
    "encode_messages",
    "millis",
    "record_size",
    "topic_config",
]
