"""Rog requests and responses in Rog's own vocabulary, and the error texts its server sends.

Layouts are in rog.md §2 (requests) and §3 (responses); the texts are copied byte for byte from
rog.md §4 because Rog clients (and its own test suite) compare them literally.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

__all__ = [
    "AT_LEAST_ONE_PARTITION",
    "COMMAND_NOT_CREATED",
    "NO_DATA_LEFT",
    "UNABLE_TO_SEND_MESSAGE",
    "UNPARSEABLE_DATA",
    "UNPARSEABLE_DATA_SIZE",
    "UNPARSEABLE_GROUP",
    "UNPARSEABLE_GROUP_SIZE",
    "UNPARSEABLE_NAME",
    "UNPARSEABLE_NAME_SIZE",
    "UNPARSEABLE_PARTITION",
    "Ack",
    "CreateLog",
    "Error",
    "Fetch",
    "FetchOk",
    "Ok",
    "Publish",
    "Request",
    "Response",
    "UnknownCommand",
    "log_already_exists",
    "message_too_large",
    "no_log_registered",
    "partition_out_of_range",
    "unparseable",
]


# --- requests (rog.md §2) ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateLog:
    name: str
    partitions: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Publish:
    name: str
    partition: int
    data: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class Fetch:
    name: str
    partition: int
    group: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Ack:
    name: str
    partition: int
    group: str


@dataclass(frozen=True, slots=True, kw_only=True)
class UnknownCommand:
    # Any command byte 0x04-0xFF; the server answers it with COMMAND_NOT_CREATED (rog.md §4).
    code: int


Request: TypeAlias = CreateLog | Publish | Fetch | Ack | UnknownCommand


# --- responses (rog.md §3) --------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Ok:
    # Success of create, publish and ack is the single byte 00, with no size and no body.
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchOk:
    data: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class Error:
    text: str


Response: TypeAlias = Ok | FetchOk | Error


# --- error texts (rog.md §4) ------------------------------------------------------------------

NO_DATA_LEFT = "No data left in the log to be read"
COMMAND_NOT_CREATED = "Command not created yet"
AT_LEAST_ONE_PARTITION = "Number of partitions must be at least 1"
# What the real server says when a publish cannot be queued; the gateway reuses it for a
# backend that refuses a publish, so Rog clients see a text they may already handle.
UNABLE_TO_SEND_MESSAGE = "Unable to send message to channel"


def log_already_exists(name: str) -> str:
    return f"Log {name} already exists"


def no_log_registered(name: str) -> str:
    return f"No log registered with name {name}"


def partition_out_of_range(partition: int, name: str, count: int) -> str:
    return f"Trying to access partition {partition} but log {name} has {count} partitions"


def unparseable(field: str) -> str:
    return f"Unparseable command, unable to parse {field}"


# The fields a request can stop before, in wire order (rog.md §4 "Parse errors"). The partition
# count of create-log is reported as "partition", as the real parser does.
UNPARSEABLE_PARTITION = unparseable("partition")
UNPARSEABLE_NAME_SIZE = unparseable("name size")
UNPARSEABLE_NAME = unparseable("name")
UNPARSEABLE_DATA_SIZE = unparseable("data size")
UNPARSEABLE_DATA = unparseable("data")
UNPARSEABLE_GROUP_SIZE = unparseable("group size")
UNPARSEABLE_GROUP = unparseable("group")


def message_too_large(declared: int, maximum: int) -> str:
    # Not a Rog text: the real server has no limit and crashes on huge sizes (rog.md §1), so the
    # gateway refuses them with an error of its own before allocating anything.
    return f"Message of {declared} bytes exceeds the maximum of {maximum} bytes"
