"""Sans-I/O Iggy codecs: ``IggyServerCodec`` for the gateway's listener (both framings on one
port, decided from the first bytes, §0.3) and ``IggyClientCodec`` for talking to an Iggy server.
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from xxhash import xxh3_64_intdigest

from protocols._wire import (
    NEED_DATA,
    ConnectionClosed,
    Gather,
    LocalProtocolError,
    NeedData,
    Receiver,
    RemoteProtocolError,
)

from .batch import BATCH_HEADER_SIZE
from .body_messages import SPLIT_SEND_FROM, SentParts, decode_sent_parts, polled_pieces
from .codes import (
    CHECKSUMMED_OPERATIONS,
    CODE_OF_OPERATION,
    OPERATION_OF_CODE,
    RESULT_FRAMED_OPERATIONS,
    Era,
    Framing,
    Operation,
)
from .commands import (
    Command,
    ReplyBody,
    code_of,
    decode_register,
    decode_reply_body,
    decode_request_body,
    encode_reply_body,
    encode_request_body,
)
from .frames_messages import PolledMessages, PollMessages
from .frames_system import (
    LoginRegisterResponse,
    LoginUser,
    LogoutUser,
    UnknownCommand,
)
from .legacy import (
    encode_legacy_reply,
    encode_legacy_request,
    read_legacy_reply,
    read_legacy_request,
)
from .status import Status, eviction_status
from .vsr import (
    COMMAND_AT,
    COMMAND_EVICTION,
    COMMAND_REPLY,
    COMMAND_REQUEST,
    HEADER_SIZE,
    OPERATION_AT,
    Eviction,
    ReplyHeader,
    RequestHeader,
    decode_reply_header,
    decode_request_header,
    encode_eviction,
    encode_reply_header,
    encode_request_header,
    frame_size,
)
from .wire import Reader, malformed, pack_u32

__all__ = [
    "DEFAULT_MAX_FRAME_SIZE",
    "DETECT_SIZE",
    "IggyClientCodec",
    "IggyReply",
    "IggyRequest",
    "IggyServerCodec",
    "detect",
    "legacy_era",
]

DEFAULT_MAX_FRAME_SIZE = 64 * 1024 * 1024
DETECT_SIZE = 8  # §0.3: a legacy ping is 8 bytes long, so never wait for more
_OPERATIONS = frozenset(int(op) for op in Operation)
_T = TypeVar("_T")
_COMMAND_NAMES = {COMMAND_REQUEST: "Request", COMMAND_REPLY: "Reply", COMMAND_EVICTION: "Eviction"}


def detect(first_bytes: bytes) -> Framing | NeedData:
    """§0.3: a VSR client's first 48 bytes are 0 (unsealed checksums, no cluster), while a
    legacy request starts with its non-zero length. Any non-zero byte among the first 8
    means legacy at once; 8 zero bytes mean VSR."""
    head = first_bytes[:DETECT_SIZE]
    if any(head):
        return Framing.LEGACY
    return Framing.VSR if len(head) == DETECT_SIZE else NEED_DATA


def legacy_era(version: str) -> Era:
    """The era of a legacy client from its LoginUser version: "0.6.202" (iggy-py 0.4.0) is A,
    "0.10.0" (apache-iggy 0.8.0) and anything unreadable is B (§9)."""
    try:
        major, minor = (int(part) for part in version.split(".")[:2])
    except ValueError:
        return Era.B
    return Era.A if (major, minor) < (0, 7) else Era.B


@dataclass(frozen=True, slots=True, kw_only=True)
class IggyRequest:
    """One request as the listener sees it: its decoded command and what answering needs."""

    framing: Framing
    era: Era
    code: int
    command: Command
    header: RequestHeader | None = None  # VSR only: client, request, session, operation ...


@dataclass(frozen=True, slots=True, kw_only=True)
class IggyReply:
    """One reply as the backend adapter sees it, paired with the command it answers."""

    command: Command
    status: int = Status.OK  # an IggyError code (§8) when the request failed
    body: ReplyBody | None = None  # None: an empty OK body ("not found" for Get*, §3.7)
    result_rejection: bool = False  # VSR: the error came in the result section (§3.7)
    eviction: Eviction | None = None  # VSR: the session was ended (§3.4)


class _Receiver(Receiver):
    __slots__ = ()

    def _read_vsr(self, commands: tuple[int, ...]) -> tuple[bytes, bytes | SentParts] | None:
        raw = self._buffer.consume_exactly(HEADER_SIZE)
        if raw is None:
            return None
        if raw[COMMAND_AT] not in commands:  # refuse a wrong header before waiting for its body
            expected = " or ".join(_COMMAND_NAMES[c] for c in commands)
            raise RemoteProtocolError(f"VSR header command {raw[COMMAND_AT]}; expected {expected}")
        size = frame_size(raw)
        if size < HEADER_SIZE:
            raise RemoteProtocolError(f"VSR frame size {size} is below its 256-byte header")
        self._buffer.check_size(size)  # before waiting for (or allocating) the body
        if (
            size - HEADER_SIZE >= SPLIT_SEND_FROM
            and raw[COMMAND_AT] == COMMAND_REQUEST
            and raw[OPERATION_AT] == Operation.SEND_MESSAGES
        ):
            parts = self._sent_parts(size - HEADER_SIZE)
            return None if parts is None else (raw, parts)
        # The chunks it came in, joined (none when it came in one).
        body = self._buffer.consume_exactly(size - HEADER_SIZE)
        if body is None:
            return None
        return raw, body

    def _sent_parts(self, size: int) -> SentParts | bytes | None:
        """A SendMessages body of ``size`` bytes in its two parts; whole when its metadata
        length does not leave room for a batch header (decoded, and refused, as before)."""
        length = self._buffer.consume_exactly(4)
        if length is None:
            return None
        metadata = int.from_bytes(length, "little")
        if metadata > size - 4 - BATCH_HEADER_SIZE:
            rest = self._buffer.consume_exactly(size - 4)
            return None if rest is None else length + rest
        head = self._buffer.consume_exactly(metadata)
        if head is None:
            return None
        batch = self._buffer.consume_exactly(size - 4 - metadata)
        if batch is None:
            return None
        return SentParts(length + head, batch)

    def _frame(self, read: Callable[[], _T | None]) -> _T | None:
        """``read`` one whole frame and commit it, or roll back to its first byte."""
        try:
            frame = read()
        except RemoteProtocolError:
            self._buffer.rollback()
            raise
        if frame is None:
            self._buffer.rollback()
            return None
        self._buffer.commit()
        return frame


class IggyServerCodec(_Receiver):
    """The server role. The framing is decided on the first frame and then kept.

    A body that cannot be decoded raises RemoteProtocolError whose ``hint`` is the Status to
    answer with; its frame is consumed and ``rejected`` holds its envelope (command
    ``UnknownCommand`` with the raw payload), so ``send_error(codec.rejected, exc.hint)``
    answers it, as the real server does, and the connection may go on. Framing errors
    (oversized, bad header, EOF inside a frame) leave ``rejected`` None: close.
    """

    __slots__ = ("_framing", "legacy_era", "rejected")

    def __init__(
        self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE, *, legacy_era: Era = Era.B
    ) -> None:
        super().__init__(max_frame_size)
        self._framing: Framing | None = None
        # The payload era of legacy requests: B until a LoginUser says otherwise.
        self.legacy_era = legacy_era
        self.rejected: IggyRequest | None = None

    @property
    def framing(self) -> Framing | None:
        return self._framing

    @property
    def era(self) -> Era:
        return Era.C if self._framing is Framing.VSR else self.legacy_era

    def next_request(self) -> IggyRequest | NeedData | ConnectionClosed:
        self.rejected = None
        if self._framing is None:
            decided = detect(self._buffer.peek(min(DETECT_SIZE, len(self._buffer))) or b"")
            if decided is NEED_DATA:
                return self._idle("request")
            self._framing = decided
        if self._framing is Framing.VSR:
            vsr = self._frame(lambda: self._read_vsr((COMMAND_REQUEST,)))
            if vsr is None:
                return self._idle("request")
            return self._decode_vsr(decode_request_header(vsr[0]), vsr[1])
        legacy = self._frame(lambda: read_legacy_request(self._buffer))
        if legacy is None:
            return self._idle("request")
        return self._decode_legacy(*legacy)

    def _decode_vsr(self, header: RequestHeader, body: bytes | SentParts) -> IggyRequest:
        op = header.operation
        code = header.code if op == Operation.NON_REPLICATED else CODE_OF_OPERATION.get(op, 0)
        if isinstance(body, SentParts):
            try:
                sent = decode_sent_parts(body.metadata, body.batch)
            except RemoteProtocolError:
                body = body.joined()  # decoded whole below: refused exactly as it would be
            else:
                return IggyRequest(
                    framing=Framing.VSR, era=Era.C, code=code, command=sent, header=header
                )
        try:
            command: Command
            if op == Operation.REGISTER:
                command = decode_register(body)
                code = code_of(command)
            elif op == Operation.NON_REPLICATED or op in CODE_OF_OPERATION:
                command = decode_request_body(code, body, Era.C)
            else:
                command = UnknownCommand(code=code, payload=body)
        except RemoteProtocolError:
            self.rejected = IggyRequest(
                framing=Framing.VSR,
                era=Era.C,
                code=code,
                command=UnknownCommand(code=code, payload=body),
                header=header,
            )
            raise
        return IggyRequest(
            framing=Framing.VSR, era=Era.C, code=code, command=command, header=header
        )

    def _decode_legacy(self, code: int, payload: bytes) -> IggyRequest:
        era = self.legacy_era
        try:
            command = decode_request_body(code, payload, era)
        except RemoteProtocolError:
            self.rejected = IggyRequest(
                framing=Framing.LEGACY,
                era=era,
                code=code,
                command=UnknownCommand(code=code, payload=payload),
            )
            raise
        if isinstance(command, LoginUser):
            self.legacy_era = legacy_era(command.version)
        return IggyRequest(framing=Framing.LEGACY, era=era, code=code, command=command)

    # --- replies ------------------------------------------------------------------------------

    def send_ok(self, request: IggyRequest, body: ReplyBody | None = None) -> bytes:
        """A success: ``body`` must be one of the replies of the request's command, or None
        for an empty body (a Get* "not found", or a command with nothing to say)."""
        payload = encode_reply_body(request.command, body, request.era)
        if request.framing is Framing.LEGACY:
            return encode_legacy_reply(Status.OK, payload)
        header = _vsr_header(request)
        if header.operation in RESULT_FRAMED_OPERATIONS:
            payload = pack_u32(0) + payload  # result section: no errors (§3.7)
        # The real server puts the session in "op"; a login reply carries the new one.
        session = body.session if isinstance(body, LoginRegisterResponse) else header.session
        return self._reply(header, Status.OK, payload, session)

    def send_polled(self, request: IggyRequest, body: PolledMessages) -> Gather:
        """``send_ok`` for a poll, in pieces: the stored batches the answer carries (views,
        ``PolledMessages.batches``) go to the writer as they are, not copied into one frame."""
        if not isinstance(request.command, PollMessages):
            raise LocalProtocolError(f"PolledMessages does not answer {request.code}")
        if request.framing is Framing.LEGACY:
            data = self.send_ok(request, body)
            return Gather([data], len(data))
        header = _vsr_header(request)
        pieces = polled_pieces(body, Era.C)
        if header.operation in RESULT_FRAMED_OPERATIONS:
            pieces.insert(0, pack_u32(0))  # result section: no errors (§3.7)
        size = sum(p.nbytes if isinstance(p, memoryview) else len(p) for p in pieces)
        head = self._reply_header(header, Status.OK, size, header.session)
        return Gather([head, *pieces], len(head) + size)

    def send_error(self, request: IggyRequest, status: int) -> bytes:
        """A failure on the status channel: VSR status at offset 216 with an empty body, which
        every operation accepts (§3.7); legacy ``[status][0]`` (§9.1)."""
        if status == Status.OK:
            raise LocalProtocolError("an error needs a non-zero status")
        if request.framing is Framing.LEGACY:
            return encode_legacy_reply(status, b"")
        header = _vsr_header(request)
        return self._reply(header, status, b"", header.session)

    def send_rejection(self, request: IggyRequest, status: int) -> bytes:
        """VSR result-section rejection ``[1][0][status]`` of a result-framed op (§3.7)."""
        header = _vsr_header(request)
        if header.operation not in RESULT_FRAMED_OPERATIONS or status == Status.OK:
            raise LocalProtocolError(f"operation {header.operation} has no result section")
        payload = pack_u32(1) + pack_u32(0) + pack_u32(status, "status")
        return self._reply(header, Status.OK, payload, header.session)

    def send_eviction(
        self,
        request: IggyRequest,
        reason: int,
        *,
        server_protocol_version: int = 0,
        server_protocol_version_min: int = 0,
    ) -> bytes:
        """A VSR Eviction frame: how the real server refuses a login (§3.4)."""
        header = _vsr_header(request)
        return encode_eviction(
            Eviction(
                client=header.client,
                reason=reason,
                server_protocol_version=server_protocol_version,
                server_protocol_version_min=server_protocol_version_min,
            )
        )

    @classmethod
    def _reply(cls, header: RequestHeader, status: int, payload: bytes, session: int) -> bytes:
        return cls._reply_header(header, status, len(payload), session) + payload

    @staticmethod
    def _reply_header(header: RequestHeader, status: int, size: int, session: int) -> bytes:
        reply = ReplyHeader(
            client=header.client,
            request=header.request,
            operation=header.operation,
            status=status,
            op=session,
            request_checksum=header.request_checksum,
            timestamp=header.timestamp,
        )
        return encode_reply_header(reply, size)


def _vsr_header(request: IggyRequest) -> RequestHeader:
    if request.framing is not Framing.VSR or request.header is None:
        raise LocalProtocolError("only a VSR request has a header to answer")
    return request.header


def _new_client_id() -> int:
    return uuid.uuid4().int  # §3.2: random non-zero UUIDv4 bits, new for every login session


class IggyClientCodec(_Receiver):
    """The client role: frames commands and decodes each reply as the answer to the oldest
    outstanding command. In VSR it keeps the session and the request counter of §3.6 (public,
    so a caller may resume or replay them)."""

    __slots__ = ("_outstanding", "client_id", "era", "framing", "request_number", "session")

    def __init__(
        self,
        framing: Framing = Framing.VSR,
        *,
        era: Era | None = None,
        client_id: int | None = None,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    ) -> None:
        super().__init__(max_frame_size)
        self.framing = Framing(framing)
        if era is None:
            era = Era.C if self.framing is Framing.VSR else Era.B
        if (era is Era.C) != (self.framing is Framing.VSR):
            raise LocalProtocolError(f"era {era} does not go with the {framing} framing")
        self.era = era
        self.client_id = _new_client_id() if client_id is None else client_id
        self.session = 0
        self.request_number = 1  # §3.6: the counter is 1 before login
        self._outstanding: deque[Command] = deque()

    def send(self, command: Command) -> bytes:
        payload = encode_request_body(command, self.era)  # may refuse: then nothing is owed
        code = code_of(command)
        if self.framing is Framing.LEGACY:
            data = encode_legacy_request(code, payload)
        else:
            op = OPERATION_OF_CODE.get(code, Operation.NON_REPLICATED)
            request = self.request_number
            if op == Operation.REGISTER:
                request = 0
            elif op in CHECKSUMMED_OPERATIONS:  # Logout and metadata ops take and advance it
                self.request_number += 1
            header = RequestHeader(
                client=self.client_id,
                request=request,
                operation=op,
                session=self.session,
                code=code if op == Operation.NON_REPLICATED else 0,
                request_checksum=xxh3_64_intdigest(payload) if op in CHECKSUMMED_OPERATIONS else 0,
            )
            data = encode_request_header(header, len(payload)) + payload
        self._outstanding.append(command)
        return data

    def next_reply(self) -> IggyReply | NeedData | ConnectionClosed:
        if not self._outstanding:
            if len(self._buffer):
                raise RemoteProtocolError("the server sent bytes with no request outstanding")
            return self._idle("reply")
        if self.framing is Framing.VSR:
            vsr = self._frame(lambda: self._read_vsr((COMMAND_REPLY, COMMAND_EVICTION)))
            if vsr is None:
                return self._idle("reply")
            body = vsr[1]
            assert isinstance(body, bytes)  # (only requests are taken in parts)
            return self._vsr_reply(self._outstanding.popleft(), decode_reply_header(vsr[0]), body)
        legacy = self._frame(lambda: read_legacy_reply(self._buffer))
        if legacy is None:
            return self._idle("reply")
        command = self._outstanding.popleft()
        status, payload = legacy
        if status != Status.OK:
            return IggyReply(command=command, status=status)
        return IggyReply(command=command, body=decode_reply_body(command, payload, self.era))

    def _vsr_reply(
        self, command: Command, header: ReplyHeader | Eviction, payload: bytes
    ) -> IggyReply:
        if isinstance(header, Eviction):
            self.session = 0
            return IggyReply(
                command=command, status=eviction_status(header.reason), eviction=header
            )
        if header.status != Status.OK:
            return IggyReply(command=command, status=header.status)
        if header.operation not in _OPERATIONS:
            malformed(f"reply operation {header.operation} is not an Iggy operation")
        if header.operation in RESULT_FRAMED_OPERATIONS:
            reader = Reader(payload)
            errors = reader.u32("result count")
            if errors == 1:
                reader.u32("result index")
                status = reader.u32("result code")
                reader.expect_end("result section")
                return IggyReply(command=command, status=status, result_rejection=True)
            if errors != 0:
                malformed(f"a result section with {errors} results")
            payload = payload[4:]
        body = decode_reply_body(command, payload, Era.C)
        if header.operation == Operation.REGISTER:
            if not isinstance(body, LoginRegisterResponse) or body.session == 0:
                malformed("a login reply without a session")
            self.session = body.session
        elif isinstance(command, LogoutUser):
            # §5.2: after a logout the client starts over with a new client id.
            self.session = 0
            self.client_id = _new_client_id()
            self.request_number = 1
        return IggyReply(command=command, body=body)
