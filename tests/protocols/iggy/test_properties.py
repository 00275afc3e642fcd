"""Hypothesis properties of the Iggy codec: a round trip for every frame class in every era
that carries it, and fuzzing (any bytes decode or raise RemoteProtocolError, nothing else)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocols._wire import NEED_DATA, RemoteProtocolError
from protocols.iggy import (
    CONNECTION_CLOSED,
    Command,
    Era,
    IggyReply,
    IggyRequest,
    IggyServerCodec,
    LoginRegisterResponse,
    PolledMessages,
    ReplyBody,
    UnknownCommand,
)
from protocols.iggy.commands import (
    COMMANDS,
    decode_reply_body,
    decode_request_body,
    encode_reply_body,
    encode_request_body,
)
from tests.protocols.iggy import samples
from tests.protocols.iggy.strategies import frames
from tests.protocols.iggy.support import MAX, answer, client, decode_one, server

FAST = settings(max_examples=30, deadline=None)
FUZZ = settings(max_examples=300, deadline=None)


def normalized(body: Any) -> Any:
    if isinstance(body, PolledMessages):  # era C checksums are the encoder's own
        return replace(body, messages=tuple(replace(m, checksum=0) for m in body.messages))
    return body


REQUEST_CASES = [
    (era, spec.request) for era in Era for spec in COMMANDS.values() if era in spec.eras
]
# Every reply class of an era, with a request it answers (from the hand-made samples).
REPLY_REQUESTS: dict[Era, dict[type[Any], Command]] = {
    era: {type(body): command for command, body in reversed(samples.replies(era))} for era in Era
}
REPLY_CASES = [(era, cls) for era in Era for cls in REPLY_REQUESTS[era]]


def case_id(case: object) -> str:
    return case.__name__ if isinstance(case, type) else str(case)


@pytest.mark.parametrize(("era", "cls"), REQUEST_CASES, ids=case_id)
@FAST
@given(data=st.data())
def test_request_round_trip(era: Era, cls: type[Any], data: st.DataObject) -> None:
    command = data.draw(frames(cls, era))
    wire = client(era).send(command)
    request = decode_one(wire, era)
    assert request.command == command
    assert COMMANDS[request.code].request is cls
    assert client(era).send(request.command) == wire  # and back, byte for byte


@pytest.mark.parametrize("era", list(Era))
@FAST
@given(code=st.integers(0, 2**32 - 1).filter(lambda c: c not in COMMANDS), payload=st.binary())
def test_unknown_command_round_trip(era: Era, code: int, payload: bytes) -> None:
    command = UnknownCommand(code=code, payload=payload)
    request = decode_one(client(era).send(command), era)
    assert request.command == command


@pytest.mark.parametrize(("era", "cls"), REPLY_CASES, ids=case_id)
@FAST
@given(data=st.data())
def test_reply_round_trip(era: Era, cls: type[Any], data: st.DataObject) -> None:
    body = data.draw(frames(cls, era))
    if isinstance(body, LoginRegisterResponse) and body.session == 0:
        body = replace(body, session=1)  # §3.6: a session is never 0
    command = REPLY_REQUESTS[era][cls]
    request = decode_one(client(era).send(command), era)
    wire = server(era).send_ok(request, body)
    decoded = answer(command, wire, era).body
    # An empty list and "not found" are the same empty body (§3.7).
    empty = encode_reply_body(command, body, era) == b""
    assert normalized(decoded) == (None if empty else normalized(body))
    if decoded is not None:
        assert server(era).send_ok(request, decoded) == wire


# --- fuzzing ------------------------------------------------------------------------------------


@st.composite
def mutated(draw: st.DrawFn, seeds: st.SearchStrategy[bytes]) -> bytes:
    """A valid encoding (or noise) with a few bytes overwritten, cut anywhere, junk appended."""
    wire = bytearray(draw(st.one_of(seeds, st.binary(max_size=300))))
    for position, value in draw(
        st.lists(st.tuples(st.integers(0), st.integers(0, 255)), max_size=4)
    ):
        if wire:
            wire[position % len(wire)] = value
    cut = draw(st.one_of(st.just(len(wire)), st.integers(0, len(wire))))
    return bytes(wire[:cut]) + draw(st.binary(max_size=20))


@st.composite
def pieces(draw: st.DrawFn, seeds: st.SearchStrategy[bytes]) -> list[bytes]:
    wire = draw(mutated(seeds))
    cuts = sorted(draw(st.lists(st.integers(0, len(wire)), max_size=6)))
    return [wire[a:b] for a, b in zip([0, *cuts], [*cuts, len(wire)], strict=True)]


def request_wires(era: Era) -> st.SearchStrategy[bytes]:
    return st.sampled_from(samples.requests(era)).map(lambda c: client(era).send(c))


@pytest.mark.parametrize("era", list(Era))
@FUZZ
@given(data=st.data(), eof=st.booleans(), max_frame_size=st.sampled_from([300, MAX]))
def test_fuzz_server(era: Era, data: st.DataObject, eof: bool, max_frame_size: int) -> None:
    parts = data.draw(pieces(request_wires(era)))
    codec = IggyServerCodec(max_frame_size=max_frame_size, legacy_era=era)
    results: list[object] = []
    try:
        for part in parts:
            codec.receive_data(part)
            results.append(codec.next_request())
        if eof:
            codec.receive_eof()
        results.append(codec.next_request())
    except RemoteProtocolError as exc:
        assert exc.hint is None or isinstance(exc.hint, int)
    for result in results:
        assert result is NEED_DATA or result is CONNECTION_CLOSED or isinstance(result, IggyRequest)


def reply_wires(era: Era) -> st.SearchStrategy[tuple[Command, bytes]]:
    def encode(pair: tuple[Command, ReplyBody]) -> tuple[Command, bytes]:
        command, body = pair
        return command, server(era).send_ok(decode_one(client(era).send(command), era), body)

    return st.sampled_from(samples.replies(era)).map(encode)


@pytest.mark.parametrize("era", list(Era))
@FUZZ
@given(data=st.data(), eof=st.booleans())
def test_fuzz_client(era: Era, data: st.DataObject, eof: bool) -> None:
    command, wire = data.draw(reply_wires(era))
    parts = data.draw(pieces(st.just(wire)))
    codec = client(era)
    codec.send(command)
    codec.send(command)
    results: list[object] = []
    try:
        for part in parts:
            codec.receive_data(part)
            results.append(codec.next_reply())
        if eof:
            codec.receive_eof()
        results.append(codec.next_reply())
    except RemoteProtocolError:
        pass
    for result in results:
        assert result is NEED_DATA or result is CONNECTION_CLOSED or isinstance(result, IggyReply)


@pytest.mark.parametrize("era", list(Era))
@FUZZ
@given(data=st.data())
def test_fuzz_request_bodies(era: Era, data: st.DataObject) -> None:
    spec = data.draw(st.sampled_from([s for s in COMMANDS.values() if era in s.eras]))
    seed = frames(spec.request, era).map(lambda c: encode_request_body(c, era))
    payload = data.draw(mutated(seed))
    try:
        command = decode_request_body(spec.code, payload, era)
    except RemoteProtocolError as exc:
        assert isinstance(exc.hint, int)
    else:
        assert type(command) is spec.request


@pytest.mark.parametrize("era", list(Era))
@FUZZ
@given(data=st.data())
def test_fuzz_reply_bodies(era: Era, data: st.DataObject) -> None:
    cls = data.draw(st.sampled_from(sorted(REPLY_REQUESTS[era], key=lambda c: c.__name__)))
    command = REPLY_REQUESTS[era][cls]
    seed = frames(cls, era).map(lambda body: encode_reply_body(command, body, era))
    payload = data.draw(mutated(seed))
    try:
        body = decode_reply_body(command, payload, era)
    except RemoteProtocolError:
        return
    assert body is None or type(body) is cls
