"""Sans-I/O Rog codecs: ``RogServerCodec`` for the gateway's listener, ``RogClientCodec`` for
talking to a Rog server. Rog is one request and one reply per TCP connection (rog.md §1).
"""

from __future__ import annotations

from protocols._wire import (
    CONNECTION_CLOSED,
    NEED_DATA,
    ConnectionClosed,
    LocalProtocolError,
    NeedData,
    Receiver,
    RemoteProtocolError,
)

from .frames import (
    Ack,
    CreateLog,
    Error,
    Fetch,
    FetchOk,
    Publish,
    Request,
    Response,
    unparseable,
)
from .framing import (
    Incomplete,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)

__all__ = [
    "CONNECTION_CLOSED",
    "DEFAULT_MAX_FRAME_SIZE",
    "ConnectionClosed",
    "RogClientCodec",
    "RogServerCodec",
]

DEFAULT_MAX_FRAME_SIZE = 64 * 1024 * 1024


class RogServerCodec(Receiver):
    __slots__ = ("_replied", "_request")

    def __init__(self, max_frame_size: int) -> None:
        super().__init__(max_frame_size)
        self._request: Request | None = None
        self._replied = False

    def next_frame(self) -> Request | NeedData | ConnectionClosed:
        # One request per connection (rog.md §1): bytes after it are never parsed, as the real
        # server ignores them; they stay visible in ``trailing_data``.
        if self._request is not None or (self._eof and not len(self._buffer)):
            return CONNECTION_CLOSED if self._eof else NEED_DATA
        try:
            result = decode_request(self._buffer)
        except RemoteProtocolError:
            self._buffer.rollback()
            raise
        if isinstance(result, Incomplete):
            self._buffer.rollback()
            if self._eof:
                # rog.md §4 "Parse errors": the server's text names the first missing field.
                # Unlike the real server we never zero-pad, so every field can be the one.
                raise RemoteProtocolError(
                    f"connection closed before the request's {result.field}",
                    hint=Error(text=unparseable(result.field)),
                )
            return NEED_DATA
        self._buffer.commit()
        self._request = result
        return result

    def send(self, response: Response) -> bytes:
        if self._replied:
            raise LocalProtocolError("Rog answers one request per connection (rog.md §1)")
        # An Error may go out before any request (the hint of a RemoteProtocolError); a success
        # must have the shape the client will parse: fetch gets FetchOk, create, publish and
        # ack get Ok, an unknown command gets neither (rog.md §3).
        if not isinstance(response, Error):
            if isinstance(response, FetchOk):
                fits = isinstance(self._request, Fetch)
            else:
                fits = isinstance(self._request, CreateLog | Publish | Ack)
            if not fits:
                raise LocalProtocolError(f"{response!r} does not answer {self._request!r}")
        self._replied = True
        return encode_response(response)


class RogClientCodec(Receiver):
    __slots__ = ("_outstanding",)

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        super().__init__(max_frame_size)
        self._outstanding: Request | None = None

    def send(self, request: Request) -> bytes:
        if self._outstanding is not None:
            raise LocalProtocolError(f"{self._outstanding!r} is still waiting for its reply")
        if self._eof:
            raise LocalProtocolError("the server has closed the connection")
        data = encode_request(request)  # may refuse; then nothing is outstanding
        self._outstanding = request
        return data

    def next_frame(self) -> Response | NeedData | ConnectionClosed:
        if self._outstanding is None:
            if len(self._buffer):
                # rog.md §7: the server sends nothing after its one reply.
                raise RemoteProtocolError("the server sent bytes with no request outstanding")
            return CONNECTION_CLOSED if self._eof else NEED_DATA
        # Only a fetch's success carries a size and a body (rog.md §3).
        expect_fetch = isinstance(self._outstanding, Fetch)
        try:
            result = decode_response(self._buffer, expect_fetch)
        except RemoteProtocolError:
            self._buffer.rollback()
            raise
        if isinstance(result, Incomplete):
            self._buffer.rollback()
            if not self._eof:
                return NEED_DATA
            if result.field == "status":
                # rog.md §3/§4: a server-side panic closes with 0 bytes (e.g. fetch from a
                # partition that does not exist).
                raise RemoteProtocolError("the server closed the connection without replying")
            raise RemoteProtocolError(f"connection closed before the reply's {result.field}")
        self._buffer.commit()
        self._outstanding = None
        return result
