"""Kafka framing, both roles: ``int32 size`` + header + body; message schemas from kio (§2).

The server codec decodes requests into kio dataclasses and encodes kio responses; the client
codec (the Kafka backend) does the reverse and remembers which request each correlation id
answers, since a response does not say what it is. One connection may pipeline requests; the
caller sends responses in request order.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, Final, TypeAlias

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import SerialError

from protocols._wire import (
    CONNECTION_CLOSED,
    I16_BE,
    I32_BE,
    ConnectionClosed,
    LocalProtocolError,
    NeedData,
    ReceiveBuffer,
    Receiver,
    RemoteProtocolError,
    decode_uvarint,
)

from .versions import REFUSED, ApiKey, api_name

DEFAULT_MAX_FRAME_SIZE: Final = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes
UNSUPPORTED_VERSION: Final = ErrorCode.unsupported_version  # 35


@dataclass(frozen=True, slots=True, kw_only=True)
class KafkaRequest:
    """One decoded request; ``body`` is the kio request object of ``api_key``/``api_version``."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any
    size: int  # bytes of the frame after the size prefix


@dataclass(frozen=True, slots=True, kw_only=True)
class UnsupportedApiVersions:
    """An ApiVersions request newer than we serve: answer UNSUPPORTED_VERSION with a v0 body
    listing our range, and the client retries with a version we know (kafka.md §1.4 trap 3)."""

    api_version: int
    correlation_id: int
    client_id: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class KafkaResponse:
    api_key: int
    api_version: int
    correlation_id: int
    body: Any


_Reader: TypeAlias = Callable[[Any, int], tuple[Any, int]]
_Writer: TypeAlias = Callable[[Any, Any], None]


@cache
def _request_codec(api_key: int, version: int) -> tuple[type[Any], _Reader, _Reader]:
    cls = load_request_schema(api_key, version)
    return cls, entity_reader(cls.__header_schema__), entity_reader(cls)


@cache
def _response_codec(api_key: int, version: int) -> tuple[type[Any], _Reader, _Reader]:
    cls = load_response_schema(api_key, version)
    return cls, entity_reader(cls.__header_schema__), entity_reader(cls)


_writers: dict[type[Any], _Writer] = {}


def _writer(cls: type[Any]) -> _Writer:
    writer = _writers.get(cls)
    if writer is None:
        writer = _writers[cls] = entity_writer(cls)
    return writer


def _encode(header_cls: type[Any], header: Any, body_cls: type[Any], body: Any) -> bytes:
    out = io.BytesIO()
    out.write(b"\0\0\0\0")
    _writer(header_cls)(out, header)
    _writer(body_cls)(out, body)
    buf = out.getbuffer()
    I32_BE.pack_into(buf, 0, len(buf) - 4)
    del buf
    return out.getvalue()


def _frame(buffer: ReceiveBuffer) -> bytes | None:
    """The next whole frame after its size prefix, or None (nothing consumed) if incomplete."""
    prefix = buffer.peek(4)
    if prefix is None:
        return None
    (size,) = I32_BE.unpack(prefix)
    buffer.check_size(size)
    if not buffer.available(4 + size):
        return None
    buffer.consume_exactly(4)
    frame = buffer.consume_exactly(size)
    assert frame is not None
    buffer.commit()
    return frame


# kio raises KeyError for a tagged field it does not know (KIP-482 says: skip it).
_DECODE_ERRORS = (SerialError, ValueError, UnicodeDecodeError, OverflowError, IndexError, KeyError)
# librdkafka (its KIP-554 admin API, 2.2 to at least 2.16) ends AlterUserScramCredentials with a
# second empty tagged-field section, one 0x00 after the body; Kafka's parser stops at the end of
# the body and never sees it. Exactly that byte is let through, for that request only.
_EXTRA_EMPTY_TAGS: Final = frozenset({ApiKey.ALTER_USER_SCRAM_CREDENTIALS})


def _decode_error(what: str, exc: Exception) -> RemoteProtocolError:
    return RemoteProtocolError(f"malformed {what}: {exc.__class__.__name__}: {exc}")


def _skip_tags(frame: bytes, pos: int) -> int:
    count, pos = decode_uvarint(frame, pos)
    for _ in range(count):
        _, pos = decode_uvarint(frame, pos)
        size, pos = decode_uvarint(frame, pos)
        pos += size
    if pos > len(frame):
        raise RemoteProtocolError("tagged field runs past the end of the request")
    return pos


def _compact_string(frame: bytes, pos: int) -> tuple[str, int]:
    n, pos = decode_uvarint(frame, pos)
    end = pos + n - 1
    if n == 0 or end > len(frame):
        raise RemoteProtocolError("compact string null or past the end of the request")
    return frame[pos:end].decode(), end


def _decode_api_versions(cls: type[Any], frame: bytes, version: int) -> tuple[Any, str | None]:
    """ApiVersions v3+ by hand: the first request of every connection, and the only flexible one
    we serve, must survive tagged fields kio does not know (a newer client's): they are skipped,
    as KIP-482 asks. Request header v2 keeps client_id a non-compact string (kafka.md §2)."""
    (n,) = I16_BE.unpack_from(frame, 8)
    pos = 10 + max(n, 0)
    client_id = None if n < 0 else frame[10:pos].decode()
    pos = _skip_tags(frame, pos)
    name, pos = _compact_string(frame, pos)
    software, pos = _compact_string(frame, pos)
    pos = _skip_tags(frame, pos)
    if pos != len(frame):
        raise RemoteProtocolError(f"ApiVersionsRequest v{version}: bytes after the body")
    return cls(client_software_name=name, client_software_version=software), client_id


class KafkaServerCodec(Receiver):
    """The broker role. ``versions`` is what this listener serves: (min, max) per API key."""

    def __init__(
        self,
        versions: Mapping[int, tuple[int, int]],
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    ) -> None:
        super().__init__(max_frame_size)
        self.versions = versions

    def next_request(self) -> KafkaRequest | UnsupportedApiVersions | NeedData | ConnectionClosed:
        frame = _frame(self._buffer)
        if frame is None:
            return self._idle("request")
        return self.decode_request(frame)

    def decode_request(self, frame: bytes) -> KafkaRequest | UnsupportedApiVersions:
        if len(frame) < 10:  # api key, version, correlation id, client id length
            raise RemoteProtocolError(f"a {len(frame)}-byte request has no room for a header")
        api_key, version = I16_BE.unpack_from(frame, 0)[0], I16_BE.unpack_from(frame, 2)[0]
        correlation_id = I32_BE.unpack_from(frame, 4)[0]
        served = self.versions.get(api_key)
        if served is None:
            raise RemoteProtocolError(f"unknown or unserved api key {api_key} (v{version})")
        low, high = served
        if not low <= version <= high or version in REFUSED.get(api_key, ()):
            if api_key == ApiKey.API_VERSIONS and version > high:
                return UnsupportedApiVersions(
                    api_version=version, correlation_id=correlation_id, client_id=None
                )
            known = api_name(api_key)
            name = known.upper() if known else f"api key {api_key}"
            raise RemoteProtocolError(f"{name} v{version} is not served (range {low}-{high})")
        try:
            cls, read_header, read_body = _request_codec(api_key, version)
        except Exception as exc:  # kio has no schema for it: a gap in our table, not the peer
            raise LocalProtocolError(f"no schema for api {api_key} v{version}") from exc
        try:
            if api_key == ApiKey.API_VERSIONS and version >= 3:
                body, client_id = _decode_api_versions(cls, frame, version)
            else:
                header, n = read_header(frame, 0)
                body, m = read_body(frame, n)
                client_id = header.client_id
                if n + m != len(frame) and not (
                    api_key in _EXTRA_EMPTY_TAGS and frame[n + m :] == b"\x00"
                ):
                    raise RemoteProtocolError(
                        f"{cls.__name__} v{version}: {len(frame) - n - m} bytes after the body"
                    )
        except _DECODE_ERRORS as exc:
            raise _decode_error(f"{cls.__name__} v{version}", exc) from exc
        return KafkaRequest(
            api_key=api_key,
            api_version=version,
            correlation_id=correlation_id,
            client_id=client_id,
            body=body,
            size=len(frame),
        )

    def send(self, request: KafkaRequest, body: Any) -> bytes:
        """Encode ``body`` as the response to ``request`` (same api key and version)."""
        cls, _, _ = _response_codec(request.api_key, request.api_version)
        if type(body) is not cls:
            raise LocalProtocolError(
                f"{type(body).__name__} is not the v{request.api_version} response to this request"
            )
        header_cls = cls.__header_schema__
        return _encode(header_cls, header_cls(correlation_id=request.correlation_id), cls, body)


def encode_api_versions_fallback(
    correlation_id: int, versions: Mapping[int, tuple[int, int]]
) -> bytes:
    """ApiVersions UNSUPPORTED_VERSION in the v0 layout (no throttle), listing each served range."""
    parts = [I32_BE.pack(correlation_id), I16_BE.pack(UNSUPPORTED_VERSION)]
    parts.append(I32_BE.pack(len(versions)))
    for key in sorted(versions):
        low, high = versions[key]
        parts.append(I16_BE.pack(key) + I16_BE.pack(low) + I16_BE.pack(high))
    body = b"".join(parts)
    return I32_BE.pack(len(body)) + body


class KafkaClientCodec(Receiver):
    """The client role: number requests, then decode each response as what it answers."""

    def __init__(self, client_id: str | None, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        super().__init__(max_frame_size)
        self.client_id = client_id
        self._pending: dict[int, tuple[int, int]] = {}
        self._next_id = 1

    def send(
        self, body: Any, *, expect_response: bool = True, correlation_id: int | None = None
    ) -> tuple[int, bytes]:
        """Frame a kio request object; returns its correlation id and the bytes to write.

        ``expect_response=False`` for Produce with acks=0, which the broker never answers;
        ``correlation_id`` overrides the numbering (replaying captured traffic)."""
        api_key, version = body.__api_key__, body.__version__
        if correlation_id is None:
            correlation_id = self._next_id
            self._next_id = (self._next_id + 1) & 0x7FFFFFFF
        header_cls = type(body).__header_schema__
        header = header_cls(
            request_api_key=api_key,
            request_api_version=version,
            correlation_id=correlation_id,
            client_id=self.client_id,
        )
        if expect_response:
            self._pending[correlation_id] = (api_key, version)
        return correlation_id, _encode(header_cls, header, type(body), body)

    def next_response(self) -> KafkaResponse | NeedData | ConnectionClosed:
        frame = _frame(self._buffer)
        if frame is None:
            return self._idle("response")
        if len(frame) < 4:
            raise RemoteProtocolError("a response without a correlation id")
        correlation_id = I32_BE.unpack_from(frame, 0)[0]
        try:
            api_key, version = self._pending.pop(correlation_id)
        except KeyError:
            raise RemoteProtocolError(
                f"response to unknown correlation id {correlation_id}"
            ) from None
        if (
            api_key == ApiKey.API_VERSIONS
            and len(frame) >= 6
            and I16_BE.unpack_from(frame, 4)[0] == UNSUPPORTED_VERSION
        ):
            version = 0  # the fallback answer always has the v0 layout
        cls, read_header, read_body = _response_codec(api_key, version)
        try:
            _, n = read_header(frame, 0)
            body, m = read_body(frame, n)
        except _DECODE_ERRORS as exc:
            raise _decode_error(f"{cls.__name__} v{version}", exc) from exc
        if n + m != len(frame):
            raise RemoteProtocolError(f"{cls.__name__} v{version}: trailing bytes")
        return KafkaResponse(
            api_key=api_key, api_version=version, correlation_id=correlation_id, body=body
        )


__all__ = [
    "CONNECTION_CLOSED",
    "DEFAULT_MAX_FRAME_SIZE",
    "UNSUPPORTED_VERSION",
    "ConnectionClosed",
    "KafkaClientCodec",
    "KafkaRequest",
    "KafkaResponse",
    "KafkaServerCodec",
    "UnsupportedApiVersions",
    "encode_api_versions_fallback",
]
