"""Hypothesis strategies for every RabbitMQ Stream frame class, derived from their layouts; the
few irregular frames (Publish, Deliver, and the non-wire key flags) are written out."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from hypothesis import strategies as st

from protocols.rabbitmq_stream import (
    Deliver,
    Frame,
    OffsetSpec,
    OffsetType,
    PartitionsResponse,
    Publish,
    PublishedMessage,
    PublishedSubBatch,
    RouteResponse,
    Tune,
)
from protocols.rabbitmq_stream import layout as L
from protocols.rabbitmq_stream.layout import Kind, Struct

_INTS = {
    L.U8: st.integers(0, 2**8 - 1),
    L.U16: st.integers(0, 2**16 - 1),
    L.U32: st.integers(0, 2**32 - 1),
    L.U64: st.integers(0, 2**64 - 1),
    L.I16: st.integers(-(2**15), 2**15 - 1),
    L.I32: st.integers(-(2**31), 2**31 - 1),
    L.I64: st.integers(-(2**63), 2**63 - 1),
}
_TEXT = st.text(max_size=12)
_SHORT = 4  # list sizes


def offset_specs() -> st.SearchStrategy[OffsetSpec]:
    plain = st.sampled_from(
        [OffsetType.NONE, OffsetType.FIRST, OffsetType.LAST, OffsetType.NEXT]
    ).map(lambda t: OffsetSpec(type=t))
    return st.one_of(
        plain,
        st.integers(0, 2**64 - 1).map(OffsetSpec.offset),
        st.integers(-(2**63), 2**63 - 1).map(OffsetSpec.timestamp),
    )


def kind_values(kind: Kind) -> st.SearchStrategy[Any]:
    if kind in _INTS:
        return _INTS[kind]
    if kind == L.CODE:
        return _INTS[L.U16]
    if kind == L.STRING:
        return _TEXT
    if kind == L.NULLABLE_STRING:
        return st.none() | _TEXT
    if kind in (L.BYTES, L.BYTES16):
        return st.none() | st.binary(max_size=16)
    if kind is L.OFFSET_SPEC:
        return offset_specs()
    if isinstance(kind, L.ArrayOf):
        return st.lists(kind_values(kind.item), max_size=_SHORT).map(tuple)
    if isinstance(kind, L.Optional):
        return st.none() | kind_values(kind.item)
    if isinstance(kind, L.Nested):
        return structs(kind.cls)
    if hasattr(kind, "first"):  # a pair
        return st.tuples(kind_values(kind.first), kind_values(kind.second))  # type: ignore[attr-defined]
    raise AssertionError(f"no strategy for {kind!r}")


def structs(cls: type[Struct]) -> st.SearchStrategy[Any]:
    names = [f.name for f in fields(cls)][: len(cls.LAYOUT)]  # type: ignore[arg-type]
    return st.builds(cls, **{n: kind_values(k) for n, k in zip(names, cls.LAYOUT, strict=True)})


def _publish() -> st.SearchStrategy[Publish]:
    ids = _INTS[L.U64]
    data = st.binary(max_size=16)
    simple = st.builds(PublishedMessage, publishing_id=ids, data=data)
    sub = st.builds(
        PublishedSubBatch,
        publishing_id=ids,
        compression=st.integers(0, 7),
        record_count=_INTS[L.U16],
        uncompressed_length=_INTS[L.U32],
        data=data,
    )
    v1 = st.builds(
        Publish,
        publisher_id=_INTS[L.U8],
        messages=st.lists(simple | sub, max_size=_SHORT).map(tuple),
    )
    filtered = st.builds(
        PublishedMessage, publishing_id=ids, data=data, filter_value=st.none() | _TEXT
    )
    v2 = st.builds(
        Publish,
        publisher_id=_INTS[L.U8],
        messages=st.lists(filtered, max_size=_SHORT).map(tuple),
        publish_version=st.just(2),
    )
    return v1 | v2


SPECIAL: dict[type[Frame], st.SearchStrategy[Any]] = {
    Publish: _publish(),
    Deliver: st.builds(
        Deliver,
        subscription_id=_INTS[L.U8],
        chunk=st.binary(max_size=64),
        committed_chunk_id=st.none() | _INTS[L.U64],
    ),
}


def frames(cls: type[Frame], *, from_client: bool) -> st.SearchStrategy[Any]:
    """Frames of ``cls`` as a client (or a server) sends them: only a client's Tune may have
    the response bit (the Java client's answer)."""
    if cls in SPECIAL:
        return SPECIAL[cls]
    base = structs(cls)
    if cls is Tune:
        flag = st.booleans() if from_client else st.just(False)
        return st.tuples(base, flag).map(
            lambda p: Tune(frame_max=p[0].frame_max, heartbeat=p[0].heartbeat, response=p[1])
        )
    if cls in (RouteResponse, PartitionsResponse):
        return st.tuples(base, st.booleans()).map(
            lambda p: type(p[0])(
                correlation_id=p[0].correlation_id,
                code=p[0].code,
                streams=p[0].streams,
                legacy_key=p[1],
            )
        )
    return base
