"""Hypothesis strategies for every Iggy frame class, derived from the codec's own layout table
(``protocols.iggy.commands.LAYOUTS``) so that a new field or class is generated without a
second description; the few hand-written kinds (messages, permissions, details) are here."""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

from hypothesis import strategies as st

from protocols.iggy import (
    Balanced,
    ClientConsumerGroup,
    ClientDetails,
    ClientInfo,
    Consumer,
    ConsumerKind,
    Era,
    GlobalPermissions,
    Header,
    HeaderKind,
    HeaderValue,
    LoginRegisterWithPersonalAccessToken,
    Message,
    MessagesKey,
    PartitionId,
    Permissions,
    PolledMessages,
    PollingKind,
    PollingStrategy,
    SendMessages,
    StreamPermissions,
    TopicPermissions,
)
from protocols.iggy.commands import LAYOUTS
from protocols.iggy.layout import Details, Kind, Layout, ListOf, Maybe, Primitive

__all__ = ["frames", "kind_strategy"]

U8 = st.integers(0, 0xFF)
U16 = st.integers(0, 0xFFFF)
U32 = st.integers(0, 0xFFFF_FFFF)
U64 = st.integers(0, 2**64 - 1)
U128 = st.integers(0, 2**128 - 1)
TEXT = st.text(st.characters(codec="utf-8"), max_size=40)
NAMES = st.one_of(
    TEXT.filter(lambda s: 1 <= len(s.encode()) <= 255),
    st.text(st.characters(codec="ascii"), min_size=250, max_size=255),  # the 255-byte edge
)
IDENTIFIERS: st.SearchStrategy[int | str] = st.one_of(U32, NAMES)
SMALL_BYTES = st.binary(max_size=64)


def header_values(kind: st.SearchStrategy[HeaderKind]) -> st.SearchStrategy[HeaderValue]:
    return st.builds(HeaderValue, kind=kind, value=st.binary(min_size=1, max_size=255))


def headers(era: Era) -> st.SearchStrategy[tuple[Header, ...]]:
    # Era A keys are bare strings (§7): only the String kind survives the trip.
    key_kind = st.just(HeaderKind.STRING) if era is Era.A else st.sampled_from(HeaderKind)
    pair = st.builds(
        Header, key=header_values(key_kind), value=header_values(st.sampled_from(HeaderKind))
    )
    return st.lists(pair, max_size=4).map(tuple)


PRIMITIVES: dict[str, Any] = {
    "u8": lambda era: U8,
    "u16": lambda era: U16,
    "u32": lambda era: U32,
    "u64": lambda era: U64,
    "u128": lambda era: U128,
    "f32": lambda era: st.floats(width=32, allow_nan=False),
    "flag": lambda era: st.booleans(),
    "name": lambda era: NAMES,
    "str32": lambda era: TEXT,
    "bytes32": lambda era: SMALL_BYTES,
    "bytes_rest": lambda era: SMALL_BYTES,
    "identifier": lambda era: IDENTIFIERS,
    "consumer": lambda era: st.builds(Consumer, kind=st.sampled_from(ConsumerKind), id=IDENTIFIERS),
    "partitioning": lambda era: st.one_of(
        st.builds(Balanced),
        st.builds(PartitionId, id=U32),
        st.builds(MessagesKey, key=st.binary(min_size=1, max_size=255)),
    ),
    "strategy": lambda era: st.builds(
        PollingStrategy, kind=st.sampled_from(PollingKind), value=U64
    ),
    "partition": lambda era: U32 if era is Era.A else st.none() | U32,
    "tlv_rest": headers,
    "tlv_sized": headers,
}

PERMISSIONS = st.builds(
    Permissions,
    global_permissions=st.builds(
        GlobalPermissions, **{f.name: st.booleans() for f in fields(GlobalPermissions)}
    ),
    streams=st.lists(
        st.builds(
            StreamPermissions,
            stream_id=U32,
            read_stream=st.booleans(),
            send_messages=st.booleans(),
            topics=st.lists(
                st.builds(TopicPermissions, topic_id=U32, manage_topic=st.booleans()), max_size=3
            ).map(tuple),
        ),
        max_size=3,
    ).map(tuple),
)


def messages(era: Era, *, polled: bool) -> st.SearchStrategy[tuple[Message, ...]]:
    """What each era carries of a message (§7); a VSR producer's stamps are not carried."""
    common: dict[str, Any] = {"id": U128, "payload": SMALL_BYTES, "headers": headers(era)}
    if era is Era.A:
        if polled:
            common |= {"offset": U64, "timestamp": U64, "checksum": U32, "state": U8}
        return st.lists(st.builds(Message, **common), max_size=4).map(tuple)
    if era is Era.B:
        common |= {"offset": U64, "timestamp": U64, "origin_timestamp": U64, "checksum": U64}
        return st.lists(st.builds(Message, **common), max_size=4).map(tuple)
    if polled:  # checksums are recomputed: the round trip compares them zeroed
        common |= {"offset": U64, "timestamp": st.sampled_from([0, 7, 2**64 - 1])}
        common |= {"origin_timestamp": U64}
        return st.lists(st.builds(Message, **common), max_size=5).map(tuple)
    # One batch: origin timestamps within a u32 of the smallest (§6.1).
    base = st.integers(0, 2**64 - 2**32)
    return base.flatmap(
        lambda low: st.lists(
            st.builds(Message, **common, origin_timestamp=st.integers(low, low + 2**32 - 1)),
            max_size=4,
        ).map(tuple)
    )


def details(kind: Details, era: Era) -> st.SearchStrategy[Any]:
    head_name, children_name = kind.names
    return st.lists(kind_strategy(kind.child, era), max_size=3).flatmap(
        lambda children: kind_strategy(kind.head, era).map(
            lambda head: kind.cls(
                **{
                    head_name: replace(head, **{kind.count: len(children)}),
                    children_name: tuple(children),
                }
            )
        )
    )


def kind_strategy(kind: Kind, era: Era) -> st.SearchStrategy[Any]:
    if isinstance(kind, Primitive):
        return PRIMITIVES[kind.name](era)  # type: ignore[no-any-return]
    if isinstance(kind, Maybe):
        return st.none() | kind_strategy(kind.kind, era)
    if isinstance(kind, ListOf):
        return st.lists(kind_strategy(kind.kind, era), max_size=4).map(tuple)
    if isinstance(kind, Details):
        return details(kind, era)
    if isinstance(kind, Layout):
        return st.builds(
            kind.cls,
            **{f.name: kind_strategy(f.kind, era) for f in kind.fields if era in f.eras},
        )
    if type(kind).__name__ == "_PermissionsKind":  # only ever inside a Maybe
        return PERMISSIONS
    raise AssertionError(f"no strategy for {kind!r}: add one to frames()")


def frames(cls: type[Any], era: Era) -> st.SearchStrategy[Any]:
    """Instances of ``cls`` holding only what ``era`` carries."""
    if cls is SendMessages:
        return st.builds(
            SendMessages,
            stream_id=IDENTIFIERS,
            topic_id=IDENTIFIERS,
            partitioning=PRIMITIVES["partitioning"](era),
            messages=messages(era, polled=False),
        )
    if cls is PolledMessages:
        return st.builds(
            PolledMessages,
            partition_id=U32,
            current_offset=U64,
            messages=messages(era, polled=True),
        )
    if cls is ClientDetails:
        groups = st.lists(
            st.builds(ClientConsumerGroup, stream_id=U32, topic_id=U32, group_id=U32), max_size=3
        )
        return st.tuples(kind_strategy(LAYOUTS[ClientInfo], era), groups).map(
            lambda pair: ClientDetails(
                client=replace(pair[0], consumer_groups_count=len(pair[1])),
                consumer_groups=tuple(pair[1]),
            )
        )
    if cls is LoginRegisterWithPersonalAccessToken:
        # §5.2: the server tells the two Register bodies apart by trying the password shape;
        # that is unambiguous for what the SDK sends (an empty context), so generate that.
        return kind_strategy(LAYOUTS[cls], era).map(lambda login: replace(login, context=b""))
    return kind_strategy(LAYOUTS[cls], era)
