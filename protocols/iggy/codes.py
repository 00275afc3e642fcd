"""Iggy's numbering: command codes, VSR operations, the two framings and the three payload eras.

Command codes are shared by both framings (iggy.md §3.5); a VSR request names its command by an
operation byte, with the classic code in the header only for NonReplicated (op 2).
"""

from __future__ import annotations

from enum import IntEnum, StrEnum
from typing import Final

__all__ = [
    "CHECKSUMMED_OPERATIONS",
    "CODE_OF_OPERATION",
    "OPERATION_OF_CODE",
    "RESULT_FRAMED_OPERATIONS",
    "CommandCode",
    "Era",
    "Framing",
    "Operation",
]


class Framing(StrEnum):
    """How requests and replies are delimited: 256-byte VSR headers (§3) or ``[len][code]`` (§9).
    ``Framing.VSR == "vsr"``."""

    VSR = "vsr"
    LEGACY = "legacy"


class Era(StrEnum):
    """Payload layouts (§7): where one command's bytes differ, the codec branches on this.

    A: iggy-py 0.4.0 (Rust SDK 0.6.x), legacy framing, old message layout (§9.3).
    B: apache-iggy 0.7/0.8 (SDK 0.9/0.10), legacy framing, 64-byte message headers (§9.2).
    C: apache-iggy 0.9.0 (SDK 0.11), VSR framing, message batches (§3-§6).
    """

    A = "A"
    B = "B"
    C = "C"


class CommandCode(IntEnum):
    PING = 1
    GET_STATS = 10
    GET_SNAPSHOT = 11
    GET_CLUSTER_METADATA = 12
    DESCRIBE_OPTIONS = 13
    GET_ME = 20
    GET_CLIENT = 21
    GET_CLIENTS = 22
    GET_USER = 31
    GET_USERS = 32
    CREATE_USER = 33
    DELETE_USER = 34
    UPDATE_USER = 35
    UPDATE_PERMISSIONS = 36
    CHANGE_PASSWORD = 37
    LOGIN_USER = 38  # legacy framing only
    LOGOUT_USER = 39
    LOGIN_REGISTER = 40  # VSR Register (op 1), password body
    GET_PERSONAL_ACCESS_TOKENS = 41
    CREATE_PERSONAL_ACCESS_TOKEN = 42
    DELETE_PERSONAL_ACCESS_TOKEN = 43
    LOGIN_WITH_PERSONAL_ACCESS_TOKEN = 44  # legacy framing only
    LOGIN_REGISTER_WITH_PERSONAL_ACCESS_TOKEN = 45  # VSR Register (op 1), token body
    POLL_MESSAGES = 100
    SEND_MESSAGES = 101
    FLUSH_UNSAVED_BUFFER = 102
    GET_CONSUMER_OFFSET = 120
    STORE_CONSUMER_OFFSET = 121
    DELETE_CONSUMER_OFFSET = 122
    GET_STREAM = 200
    GET_STREAMS = 201
    CREATE_STREAM = 202
    DELETE_STREAM = 203
    UPDATE_STREAM = 204
    PURGE_STREAM = 205
    GET_TOPIC = 300
    GET_TOPICS = 301
    CREATE_TOPIC = 302
    DELETE_TOPIC = 303
    UPDATE_TOPIC = 304
    PURGE_TOPIC = 305
    CREATE_PARTITIONS = 402
    DELETE_PARTITIONS = 403
    DELETE_SEGMENTS = 503
    GET_CONSUMER_GROUP = 600
    GET_CONSUMER_GROUPS = 601
    CREATE_CONSUMER_GROUP = 602
    DELETE_CONSUMER_GROUP = 603
    JOIN_CONSUMER_GROUP = 604
    LEAVE_CONSUMER_GROUP = 605
    SYNC_CONSUMER_GROUP = 606  # VSR era only (§9.2: "There is no 606")


class Operation(IntEnum):
    """The u8 at request offset 176 / reply offset 208 (§3.5)."""

    REGISTER = 1
    NON_REPLICATED = 2
    LOGOUT = 3
    CREATE_STREAM = 128
    UPDATE_STREAM = 129
    DELETE_STREAM = 130
    PURGE_STREAM = 131
    CREATE_TOPIC = 132
    UPDATE_TOPIC = 133
    DELETE_TOPIC = 134
    PURGE_TOPIC = 135
    CREATE_PARTITIONS = 136
    DELETE_PARTITIONS = 137
    DELETE_SEGMENTS = 138
    CREATE_CONSUMER_GROUP = 139
    DELETE_CONSUMER_GROUP = 140
    CREATE_USER = 141
    UPDATE_USER = 142
    DELETE_USER = 143
    CHANGE_PASSWORD = 144
    UPDATE_PERMISSIONS = 145
    CREATE_PERSONAL_ACCESS_TOKEN = 146
    DELETE_PERSONAL_ACCESS_TOKEN = 147
    JOIN_CONSUMER_GROUP = 148
    LEAVE_CONSUMER_GROUP = 149
    SEND_MESSAGES = 160
    STORE_CONSUMER_OFFSET = 161
    DELETE_CONSUMER_OFFSET = 162


_C = CommandCode
_O = Operation

# §3.5: every code with an operation of its own; all others go out as NonReplicated (op 2).
OPERATION_OF_CODE: Final[dict[int, Operation]] = {
    _C.LOGIN_REGISTER: _O.REGISTER,
    _C.LOGIN_REGISTER_WITH_PERSONAL_ACCESS_TOKEN: _O.REGISTER,
    _C.LOGOUT_USER: _O.LOGOUT,
    _C.CREATE_STREAM: _O.CREATE_STREAM,
    _C.UPDATE_STREAM: _O.UPDATE_STREAM,
    _C.DELETE_STREAM: _O.DELETE_STREAM,
    _C.PURGE_STREAM: _O.PURGE_STREAM,
    _C.CREATE_TOPIC: _O.CREATE_TOPIC,
    _C.UPDATE_TOPIC: _O.UPDATE_TOPIC,
    _C.DELETE_TOPIC: _O.DELETE_TOPIC,
    _C.PURGE_TOPIC: _O.PURGE_TOPIC,
    _C.CREATE_PARTITIONS: _O.CREATE_PARTITIONS,
    _C.DELETE_PARTITIONS: _O.DELETE_PARTITIONS,
    _C.DELETE_SEGMENTS: _O.DELETE_SEGMENTS,
    _C.CREATE_CONSUMER_GROUP: _O.CREATE_CONSUMER_GROUP,
    _C.DELETE_CONSUMER_GROUP: _O.DELETE_CONSUMER_GROUP,
    _C.CREATE_USER: _O.CREATE_USER,
    _C.UPDATE_USER: _O.UPDATE_USER,
    _C.DELETE_USER: _O.DELETE_USER,
    _C.CHANGE_PASSWORD: _O.CHANGE_PASSWORD,
    _C.UPDATE_PERMISSIONS: _O.UPDATE_PERMISSIONS,
    _C.CREATE_PERSONAL_ACCESS_TOKEN: _O.CREATE_PERSONAL_ACCESS_TOKEN,
    _C.DELETE_PERSONAL_ACCESS_TOKEN: _O.DELETE_PERSONAL_ACCESS_TOKEN,
    _C.JOIN_CONSUMER_GROUP: _O.JOIN_CONSUMER_GROUP,
    _C.LEAVE_CONSUMER_GROUP: _O.LEAVE_CONSUMER_GROUP,
    _C.SEND_MESSAGES: _O.SEND_MESSAGES,
    _C.STORE_CONSUMER_OFFSET: _O.STORE_CONSUMER_OFFSET,
    _C.DELETE_CONSUMER_OFFSET: _O.DELETE_CONSUMER_OFFSET,
}

# The reverse, for every operation but Register (whose code depends on the body) and op 2.
CODE_OF_OPERATION: Final[dict[int, CommandCode]] = {
    op: CommandCode(code) for code, op in OPERATION_OF_CODE.items() if op != _O.REGISTER
}

# §3.7: these replies start with a result section; ops 2, 3 and 160 are raw.
RESULT_FRAMED_OPERATIONS: Final = frozenset(
    op for op in Operation if op not in (_O.NON_REPLICATED, _O.LOGOUT, _O.SEND_MESSAGES)
)

# §3.2: request_checksum = XXH3(body) for Register, Logout and the metadata ops 128-149 only.
CHECKSUMMED_OPERATIONS: Final = frozenset(
    op for op in Operation if op in (_O.REGISTER, _O.LOGOUT) or 128 <= op <= 149
)
