"""Hypothesis properties of the Rog codec: round trips for every frame class, and fuzzing."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from protocols._wire import NEED_DATA, RemoteProtocolError
from protocols.rog import (
    CONNECTION_CLOSED,
    Ack,
    CreateLog,
    Error,
    Fetch,
    FetchOk,
    Ok,
    Publish,
    Request,
    Response,
    RogClientCodec,
    RogServerCodec,
    UnknownCommand,
)
from protocols.rog.framing import encode_request, encode_response
from tests.helpers.feeding import feed_three_ways
from tests.protocols.rog.support import MAX

FAST = settings(max_examples=100, deadline=None)

# Names and groups: any UTF-8 text, cut to the 255 bytes a u8 size allows (rog.md §2), plus
# long ASCII so that the 255-byte edge is reached often.
short_text = st.one_of(
    st.text(st.characters(codec="utf-8"), max_size=100).map(
        lambda s: s.encode()[:255].decode("utf-8", errors="ignore")
    ),
    st.text(st.characters(codec="ascii"), min_size=250, max_size=255),
)
u8 = st.integers(0, 255)
data = st.binary(max_size=4096)

requests: st.SearchStrategy[Request] = st.one_of(
    st.builds(CreateLog, name=short_text, partitions=u8),
    st.builds(Publish, name=short_text, partition=u8, data=data),
    st.builds(Fetch, name=short_text, partition=u8, group=short_text),
    st.builds(Ack, name=short_text, partition=u8, group=short_text),
    st.builds(UnknownCommand, code=st.integers(4, 255)),
)
# Each reply with a request it can answer, so the client knows whether 00 carries a body.
fetch = Fetch(name="l", partition=0, group="g")
replies: st.SearchStrategy[tuple[Request, Response]] = st.one_of(
    st.tuples(st.just(CreateLog(name="l", partitions=1)), st.builds(Ok)),
    st.tuples(st.just(fetch), st.builds(FetchOk, data=data)),
    st.tuples(
        st.sampled_from([fetch, Ack(name="l", partition=0, group="g")]),
        st.builds(Error, text=st.text(st.characters(codec="utf-8"), max_size=200)),
    ),
)


@FAST
@given(requests)
def test_request_round_trip(request: Request) -> None:
    wire = RogClientCodec().send(request)
    codec = RogServerCodec(max_frame_size=MAX)
    codec.receive_data(wire)
    decoded = codec.next_frame()
    assert decoded == request
    assert codec.trailing_data == b""
    assert encode_request(request) == wire


@FAST
@given(replies)
def test_response_round_trip(pair: tuple[Request, Response]) -> None:
    request, reply = pair
    server = RogServerCodec(max_frame_size=MAX)
    server.receive_data(encode_request(request))
    server.next_frame()
    wire = server.send(reply)
    client = RogClientCodec()
    client.send(request)
    client.receive_data(wire)
    assert client.next_frame() == reply
    assert encode_response(reply) == wire


@settings(max_examples=25, deadline=None)
@given(requests.filter(lambda r: not isinstance(r, Publish) or len(r.data) < 512), st.booleans())
def test_request_three_ways(request: Request, eof: bool) -> None:
    make = lambda: RogServerCodec(max_frame_size=MAX)  # noqa: E731
    frames = feed_three_ways(make, encode_request(request), eof=eof, stop_at=[CONNECTION_CLOSED])
    assert frames == [request]


@FAST
@given(requests, st.data())
def test_every_strict_prefix_at_eof_names_a_missing_field(
    request: Request, draw: st.DataObject
) -> None:
    wire = encode_request(request)
    cut = draw.draw(st.integers(0, len(wire) - 1))
    codec = RogServerCodec(max_frame_size=MAX)
    codec.receive_data(wire[:cut])
    assert codec.next_frame() is NEED_DATA
    codec.receive_eof()
    if cut == 0:
        assert codec.next_frame() is CONNECTION_CLOSED
        return
    try:
        codec.next_frame()
    except RemoteProtocolError as exc:
        assert isinstance(exc.hint, Error)
        assert exc.hint.text.startswith("Unparseable command, unable to parse ")
    else:
        raise AssertionError("a truncated request was accepted at EOF")


# Purely random bytes rarely get past a command byte (>= 0x04 is an unknown command) or a name
# size, so most fuzz inputs start from a valid frame, get a few bytes overwritten, are cut
# anywhere and get random bytes appended; then they arrive in random pieces.
@st.composite
def pieces_of(draw: st.DrawFn, valid: st.SearchStrategy[bytes]) -> list[bytes]:
    wire = bytearray(draw(st.one_of(valid, st.binary(max_size=300))))
    for position, value in draw(st.lists(st.tuples(st.integers(0), u8), max_size=3)):
        if wire:
            wire[position % len(wire)] = value
    cut = draw(st.one_of(st.just(len(wire)), st.integers(0, len(wire))))
    wire = wire[:cut] + draw(st.binary(max_size=20))
    cuts = sorted(draw(st.lists(st.integers(0, len(wire)), max_size=6)))
    return [bytes(wire[a:b]) for a, b in zip([0, *cuts], [*cuts, len(wire)], strict=True)]


small_requests = requests.filter(lambda r: not isinstance(r, Publish) or len(r.data) < 64)
FUZZ = settings(max_examples=300, deadline=None)


@FUZZ
@given(pieces_of(small_requests.map(encode_request)), st.booleans(), st.sampled_from([16, MAX]))
def test_fuzz_server_decodes_or_raises_remote_protocol_error(
    pieces: list[bytes], eof: bool, max_frame_size: int
) -> None:
    codec = RogServerCodec(max_frame_size=max_frame_size)
    results: list[object] = []
    try:
        for piece in pieces:
            codec.receive_data(piece)
            results.append(codec.next_frame())
        if eof:
            codec.receive_eof()
        results.append(codec.next_frame())
    except RemoteProtocolError as exc:
        # Every refusal comes with the error the server should send before closing.
        assert isinstance(exc.hint, Error)
    for result in results:
        assert (
            result is NEED_DATA
            or result is CONNECTION_CLOSED
            or isinstance(result, CreateLog | Publish | Fetch | Ack | UnknownCommand)
        )


reply_wires = replies.filter(lambda pair: len(encode_response(pair[1])) < 100).map(
    lambda pair: encode_response(pair[1])
)


@FUZZ
@given(st.booleans(), pieces_of(reply_wires), st.booleans(), st.sampled_from([16, MAX]))
def test_fuzz_client_decodes_or_raises_remote_protocol_error(
    is_fetch: bool, pieces: list[bytes], eof: bool, max_frame_size: int
) -> None:
    codec = RogClientCodec(max_frame_size=max_frame_size)
    codec.send(fetch if is_fetch else CreateLog(name="l", partitions=1))
    results: list[object] = []
    try:
        for piece in pieces:
            codec.receive_data(piece)
            results.append(codec.next_frame())
        if eof:
            codec.receive_eof()
        results.append(codec.next_frame())
    except RemoteProtocolError:
        pass
    for result in results:
        assert (
            result is NEED_DATA
            or result is CONNECTION_CLOSED
            or isinstance(result, Ok | FetchOk | Error)
        )
