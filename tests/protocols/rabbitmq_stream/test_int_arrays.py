"""Arrays of integers (a PublishConfirm's publishing ids, a PublishError's, a Deliver's...) are
encoded and decoded in one struct call: the bytes and the errors are what the item-by-item path
gives (every other array kind keeps it)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocols._wire import LocalProtocolError, RemoteProtocolError
from protocols.rabbitmq_stream import layout
from protocols.rabbitmq_stream.wire import Reader

INTS = [layout.U8, layout.U16, layout.U32, layout.U64, layout.I16, layout.I32, layout.I64]


def item_by_item(kind: layout._Int, values: tuple[int, ...]) -> bytes:
    return struct.pack(">i", len(values)) + b"".join(kind.encode(v) for v in values)


@pytest.mark.parametrize("kind", INTS, ids=lambda k: k.name)
@given(data=st.data())
def test_an_int_array_is_what_item_by_item_gives(kind: layout._Int, data: st.DataObject) -> None:
    bits = kind.fmt.size * 8
    low, high = (
        (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if kind.name[0] == "i" else (0, (1 << bits) - 1)
    )
    values = tuple(data.draw(st.lists(st.integers(low, high), max_size=50)))
    array = layout.ArrayOf(kind)
    raw = array.encode(values)
    assert raw == item_by_item(kind, values)
    reader = Reader(raw + b"tail")
    assert array.decode(reader) == values
    assert reader.take(4) == b"tail"
    # One value out of range: refused as the item-by-item path refuses it.
    bad = data.draw(st.sampled_from([low - 1, high + 1]))
    at = data.draw(st.integers(0, len(values)))
    with pytest.raises(LocalProtocolError, match=f"{kind.name} {bad} does not fit"):
        array.encode((*values[:at], bad, *values[at:]))


def test_a_count_past_the_end_is_refused_before_anything_is_read() -> None:
    raw = struct.pack(">i", 3) + struct.pack(">2Q", 1, 2)  # three ids said, two sent
    with pytest.raises(RemoteProtocolError, match="array count 3 does not fit the 16 bytes"):
        layout.ArrayOf(layout.U64).decode(Reader(raw))
