"""Fields of fixed-size records read column-wise: a batch of records of ``stride`` bytes each is
a table, and one field of every record is a strided slice of it per byte, which C copies out in
one call. No Python step per record; used by the Iggy batch checks (protocols/iggy/columns.py)
and the RabbitMQ Stream Publish scan (protocols/rabbitmq_stream/publish_columns.py)."""

from __future__ import annotations

__all__ = ["column", "same_in_every"]


def column(data: bytes, begin: int, stop: int, stride: int, width: int) -> bytes:
    """Bytes ``begin .. begin + width`` of every record, the records starting ``stride`` apart
    from ``begin`` up to ``stop``, one record's after the other's."""
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
    for k in range(width):
        values = data[begin + k : stop : stride]
        if values and values.count(values[0]) != len(values):
            return False
    return True
