"""What a consumer must show of a message its producer sent (DESIGN.md §3), and which fields
the gateway must count as lossy (``streamgate_translation_lossy_total{to, field}``) on the way.

- Kafka: headers are bytes (their kinds are lost: counted as ``headers``); a message id travels
  as the ``streamgate.id`` header (16 bytes, big-endian); timestamps in ms (a sub-millisecond
  part is lost: ``timestamp``).
- RabbitMQ Stream (rstream): application properties (strings and binaries both reach rstream as
  bytes, integers as ints), the key as the ``x-routing-key`` annotation, the id as message-id,
  the timestamp as creation-time.
- Iggy: typed user headers, the key as the ``streamgate.key`` header, the u128 id, the origin
  timestamp in µs.
- Rog: the value only; key, headers and id are dropped and counted (its timestamp is not
  counted: Rog has no time for any message).
"""

from __future__ import annotations

from tests.gateway.bridge.clients import HeaderView, Seen, Sent

ID_HEADER = "streamgate.id"


def _kafka(s: Sent) -> Seen:
    headers: dict[str, HeaderView] = {name: (None, v) for name, (_, v) in s.headers.items()}
    if s.id:
        headers[ID_HEADER] = (None, s.id.to_bytes(16, "big"))
    return Seen(s.value, s.key, headers, s.timestamp_ms)


def _rabbitmq_stream(s: Sent) -> Seen:
    headers: dict[str, HeaderView] = {}
    for name, (kind, v) in s.headers.items():
        if kind in ("int32", "int64"):
            headers[name] = ("int", int.from_bytes(v, "little", signed=True))
        else:
            headers[name] = (None, v)
    return Seen(s.value, s.key, headers, s.timestamp_ms, s.id)


def _iggy(s: Sent) -> Seen:
    return Seen(s.value, s.key, dict(s.headers), s.timestamp_ms, s.id)


def _rog(s: Sent) -> Seen:
    return Seen(s.value)


PROJECTIONS = {"kafka": _kafka, "rabbitmq_stream": _rabbitmq_stream, "iggy": _iggy, "rog": _rog}
SHOWS_TIMESTAMP = {"kafka", "rabbitmq_stream", "iggy"}


def expected_seen(sent: Sent, consumer: str) -> Seen:
    return PROJECTIONS[consumer](sent)


def lossy_fields(sent: list[Sent], consumer: str) -> tuple[set[str], set[str]]:
    """(fields that must be counted, fields that may be counted) for ``sent`` read by
    ``consumer``. "May": an arrival time stamped in µs has a sub-millisecond part 999 times in
    1000, and which messages get one is not the test's to know."""
    must: set[str] = set()
    may: set[str] = set()
    for s in sent:
        if consumer == "rog":
            if s.key is not None:
                must.add("key")
            if s.headers:
                must.add("headers")
            if s.id:
                must.add("id")
        elif consumer == "kafka":
            if any(kind != "raw" for kind, _ in s.headers.values()):
                must.add("headers")
            if s.timestamp_ms is None:
                may.add("timestamp")
    return must, may
