"""Fields of fixed-size records read column-wise: a batch of records of ``stride`` bytes each is
a table, and one field of every record is a strided slice of it, which C copies out in one
call. No Python step per record; used by the Iggy batch checks (protocols/iggy/columns.py)
and the RabbitMQ Stream Publish scan (protocols/rabbitmq_stream/publish_columns.py).

A field is sliced in the widest unit (8, 4, 2 or 1 bytes) that divides both its width and the
stride: an 8-byte field of 1 KiB records is one strided pass over the batch, not eight (each
pass touches a cache line per record)."""

from __future__ import annotations

from typing import Final, Literal

__all__ = ["column", "same_in_every"]

_UNITS: Final[tuple[tuple[int, Literal["Q", "I", "H"]], ...]] = ((8, "Q"), (4, "I"), (2, "H"))


_CODES: Final = dict(_UNITS)


def _units(
    data: bytes, begin: int, stop: int, stride: int, width: int
) -> tuple[memoryview, int, int] | None:
    """The records' span from ``begin`` as units of the widest size dividing ``width`` and
    ``stride`` (the span, the stride and the width in units), or None when only bytes do."""
    for size, code in _UNITS:
        if width % size == 0 and stride % size == 0:
            count = len(range(begin, stop, stride))
            if not count:
                return None
            span = memoryview(data)[begin : begin + (count - 1) * stride + width]
            return span.cast(code), stride // size, width // size
    return None


def column(data: bytes, begin: int, stop: int, stride: int, width: int) -> bytes:
    """Bytes ``begin .. begin + width`` of every record, the records starting ``stride`` apart
    from ``begin`` up to ``stop``, one record's after the other's."""
    units = _units(data, begin, stop, stride, width)
    if units is not None:
        span, step, per = units
        if per == 1:
            return span[::step].tobytes()
        out = bytearray(width * len(range(begin, stop, stride)))
        into = memoryview(out).cast(_CODES[span.itemsize])
        for k in range(per):
            into[k::per] = span[k::step]
        return bytes(out)
    if width == 1:
        return data[begin:stop:stride]
    count = len(range(begin, stop, stride))
    out = bytearray(width * count)
    for k in range(width):
        out[k::width] = data[begin + k : stop : stride]
    return bytes(out)


def same_in_every(data: bytes, begin: int, stop: int, stride: int, width: int) -> bool:
    """Whether bytes ``begin .. begin + width`` of every record (as for ``column``) are the
    first record's."""
    units = _units(data, begin, stop, stride, width)
    if units is not None:
        span, step, per = units
        for k in range(per):
            values = span[k::step].tobytes()
            first = values[: span.itemsize]
            if values != first * (len(values) // span.itemsize):
                return False
        return True
    for k in range(width):
        values = data[begin + k : stop : stride]
        if values and values.count(values[0]) != len(values):
            return False
    return True
