"""What the Rog codec tests share: the frame limit, rog.md §5's names, fresh codecs."""

from __future__ import annotations

from protocols.rog import Request, RogClientCodec, RogServerCodec

MAX = 1 << 20
ORDERS = bytes.fromhex("06 6f 72 64 65 72 73")  # name_len + "orders" (rog.md §5)
G1 = bytes.fromhex("02 67 31")  # group_len + "g1"


def server() -> RogServerCodec:
    return RogServerCodec(max_frame_size=MAX)


def client_after(request: Request) -> RogClientCodec:
    """A client codec with ``request`` outstanding, ready to parse its reply."""
    codec = RogClientCodec()
    codec.send(request)
    return codec
