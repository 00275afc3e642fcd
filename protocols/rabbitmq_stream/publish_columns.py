"""A Publish v1 frame's items read column-wise when its simple entries are all one size.

An item is ``uint64 publishing id, uint32 length, bytes``. Most producers publish messages of
one size; then the items form a table (item ``i`` starts at ``pos + i * stride``), and the ids
are eight strided slices of the frame that C copies out, unpacked in one call, with no Python
step per entry. Anything else (sizes that differ, a sub-batch, items that do not end where the
frame does) is None here, and the entry-by-entry scan, which words the errors, reads the frame.
The same column reads as Iggy's (protocols._wire.columns).
"""

from __future__ import annotations

import struct
from functools import lru_cache

from protocols._wire import column, same_in_every

__all__ = ["MIN_ITEMS", "SUB_BATCH_SIZE", "uniform_items"]

MIN_ITEMS = 8  # below this, the entry-by-entry scan is as quick
_ID_SIZE = 8
_LENGTH_SIZE = 4
_ITEM_HEAD = _ID_SIZE + _LENGTH_SIZE
_LENGTH = struct.Struct(">I")
SUB_BATCH_SIZE = 0x8000_0000  # a sub-batch's first byte has its top bit set


def uniform_items(data: bytes, pos: int, end: int, n: int) -> tuple[tuple[int, ...], range] | None:
    """The publishing ids of the ``n`` items filling ``data[pos:end]`` and where each item
    starts, when every item is a simple entry of one length; else None."""
    if n < MIN_ITEMS or not isinstance(data, bytes) or pos + _ITEM_HEAD > end:
        return None
    size = _LENGTH.unpack_from(data, pos + _ID_SIZE)[0]
    stride = _ITEM_HEAD + size
    if size & SUB_BATCH_SIZE or pos + n * stride != end:
        return None
    if not same_in_every(data, pos + _ID_SIZE, end, stride, _LENGTH_SIZE):
        return None  # lengths that differ
    ids = column(data, pos, end, stride, _ID_SIZE)
    return _ids(n).unpack(ids), range(pos, end, stride)


@lru_cache(maxsize=16)
def _ids(n: int) -> struct.Struct:
    return struct.Struct(f">{n}Q")
