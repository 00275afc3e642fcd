"""Iggy frames <-> the canonical model (DESIGN.md §3, iggy.md §4-§6).

Pure functions. Streams are canonical streams and topics canonical topics, both with the
backend's numeric ids (0-based, what a VSR client expects; era A clients choose their own ids,
and their partitions are 1-based, so the listener shifts them). How messages, headers, keys and
consumer offsets map is shared with the Iggy backend, in ``messages``, and so are both directions
of the status-code table, in ``errors``; both are re-exported here for the listener.
"""

from __future__ import annotations

from typing import Final

from gateway.model import WireBatch
from gateway.translate.iggy.errors import IggyStatus, status_of
from gateway.translate.iggy.messages import (
    KEY_HEADER,
    U64_MAX,
    WIRE_FORMAT,
    Lossy,
    consumer_group_name,
    current_offset,
    decode_wire,
    header_text,
    stored_offset,
    to_canonical,
    to_iggy,
)
from protocols import iggy as wire
from protocols.iggy.batch import restamp_pieces
from protocols.iggy.sent_batch import empty_payload, origin_range

PROTOCOL = "iggy"
NO_PARTITION: Final = 0xFFFFFFFF  # §5.8: an empty group poll with this id makes the client re-sync


# --- messages -------------------------------------------------------------------------------------


def wire_batch(cmd: wire.SendMessages) -> WireBatch | None:
    """The sent batch to store as is (nothing decoded again on an Iggy poll), when the codec
    kept it (era C, deltas 0..n-1) and every message carries its origin timestamp."""
    messages = cmd.messages
    if not cmd.batch or not messages:
        return None
    first, last = origin_range(messages)
    if first <= 0:
        return None
    return WireBatch(
        format=WIRE_FORMAT,
        data=cmd.batch,
        count=len(messages),
        first_timestamp_us=first,
        max_timestamp_us=last,
    )


def serve_batch(
    stored: WireBatch, *, partition_id: int, skip: int, limit: int
) -> tuple[tuple[bytes | memoryview, ...], int, int]:
    """A stored Iggy batch stamped for a poll: (its pieces: the new header and a view of the
    stored frames, messages, offset of the last one)."""
    pieces, count = restamp_pieces(
        stored.data,
        partition_id=partition_id,
        base_offset=stored.base_offset,
        base_timestamp=stored.first_timestamp_us,
        skip=skip,
        limit=limit,
    )
    return pieces, count, stored.base_offset + skip + count - 1


__all__ = [
    "KEY_HEADER",
    "NO_PARTITION",
    "PROTOCOL",
    "U64_MAX",
    "WIRE_FORMAT",
    "IggyStatus",
    "Lossy",
    "consumer_group_name",
    "current_offset",
    "decode_wire",
    "empty_payload",
    "header_text",
    "serve_batch",
    "status_of",
    "stored_offset",
    "to_canonical",
    "to_iggy",
    "wire_batch",
]
