"""What the abuse suite throws at each listener: valid request frames captured from real clients
(tests/vectors) or framed by the repository's own client codecs, and the seeded mutations made of
them (bit flips, inserted and deleted bytes, a size field set to huge, negative or zero, a frame
cut short, a huge declared size with part of its body, plain garbage).

Everything here is pure: the same seed gives the same cases, so a failure reproduces from the
seed the test prints. Commands that would take the gateway's state away from the canary and the
final round trips (deleting topics, streams, users; renaming or re-permissioning users) are left
out of the seeds: they are not abuse but administration, and are tested elsewhere.
"""

from __future__ import annotations

import functools
import json
import random
import struct
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from protocols.iggy import (
    ChangePassword,
    Command,
    DeletePartitions,
    DeleteSegments,
    DeleteStream,
    DeleteTopic,
    DeleteUser,
    Era,
    Framing,
    IggyClientCodec,
    LogoutUser,
    PurgeStream,
    PurgeTopic,
    UpdatePermissions,
    UpdateStream,
    UpdateTopic,
    UpdateUser,
)
from protocols.rog import Ack, CreateLog, Fetch, Publish, Request, RogClientCodec
from tests.protocols.iggy import samples as iggy_samples

VECTORS = Path(__file__).resolve().parents[1] / "vectors"

# Kafka api keys left out of the seeds: DeleteTopics, DeleteRecords, DeleteGroups.
KAFKA_DESTRUCTIVE = {20, 21, 42}
RABBIT_DESTRUCTIVE = {"Delete", "DeleteSuperStream"}
IGGY_DESTRUCTIVE = (
    ChangePassword, DeletePartitions, DeleteSegments, DeleteStream, DeleteTopic, DeleteUser,
    LogoutUser, PurgeStream, PurgeTopic, UpdatePermissions, UpdateStream, UpdateTopic, UpdateUser,
)  # fmt: skip


class Target(StrEnum):
    """A listener and, for Iggy, the framing its client speaks."""

    KAFKA = "kafka"
    RABBITMQ_STREAM = "rabbitmq_stream"
    IGGY_VSR = "iggy_vsr"
    IGGY_LEGACY = "iggy_legacy"
    ROG = "rog"

    @property
    def endpoint(self) -> str:
        return "iggy" if self.value.startswith("iggy") else self.value

    @property
    def iggy_era(self) -> Era:
        return Era.C if self is Target.IGGY_VSR else Era.B


# --- valid frames ------------------------------------------------------------------------------


def _jsonl(path: Path) -> list[object]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@functools.cache
def kafka_frames() -> tuple[bytes, ...]:
    """Every distinct request frame (size prefix included) of the captured client sessions."""
    seen: dict[bytes, None] = {}
    for path in sorted((VECTORS / "kafka" / "frames").glob("*.jsonl")):
        for row in _jsonl(path):
            assert isinstance(row, dict)
            if row["dir"] == "req" and row["api_key"] not in KAFKA_DESTRUCTIVE:
                seen[bytes.fromhex(row["hex"])] = None
    return tuple(seen)


@functools.cache
def rabbit_frames() -> tuple[bytes, ...]:
    """Every distinct client frame of the captured rstream, rbfly and probe sessions."""
    seen: dict[bytes, None] = {}
    for path in sorted((VECTORS / "rabbitmq_stream").glob("capture*.jsonl")):
        for row in _jsonl(path):
            if isinstance(row, dict):
                direction, name, hexed = row["dir"], row["name"], row["hex"]
            else:
                assert isinstance(row, list)
                _, direction, name, hexed = row
            if direction == "C->S" and name not in RABBIT_DESTRUCTIVE:
                seen[bytes.fromhex(hexed)] = None
    return tuple(seen)


def iggy_commands(era: Era) -> list[Command]:
    return [c for c in iggy_samples.requests(era) if not isinstance(c, IGGY_DESTRUCTIVE)]


@functools.cache
def iggy_frames(era: Era) -> tuple[bytes, ...]:
    """The captured request frames of ``era``'s framing (iggy.md §10) and every sample command
    framed by a fresh client codec (before a login: the header's session is 0)."""
    framing = "vsr" if era is Era.C else "legacy"
    seen: dict[bytes, None] = {}
    for row in _jsonl(VECTORS / "iggy" / "frames.jsonl"):
        assert isinstance(row, dict)
        if (row["framing"], row["direction"], row["scope"]) == (framing, "request", "frame"):
            seen[bytes.fromhex(row["hex"])] = None
    for command in iggy_commands(era):
        codec = IggyClientCodec(Framing.VSR if era is Era.C else Framing.LEGACY, era=era)
        seen[codec.send(command)] = None
    return tuple(seen)


@functools.cache
def rog_frames() -> tuple[bytes, ...]:
    requests: list[Request] = [
        CreateLog(name="fuzz", partitions=2),
        CreateLog(name="f" * 255, partitions=255),
        Publish(name="fuzz", partition=0, data=b"payload"),
        Publish(name="fuzz", partition=1, data=bytes(range(256)) * 4),
        Publish(name="nope", partition=9, data=b""),
        Fetch(name="fuzz", partition=0, group="g"),
        Fetch(name="fuzz", partition=7, group="g"),
        Ack(name="fuzz", partition=0, group="g"),
        Ack(name="nope", partition=0, group=""),
    ]
    return tuple(RogClientCodec().send(r) for r in requests)


def valid_frames(target: Target) -> tuple[bytes, ...]:
    match target:
        case Target.KAFKA:
            return kafka_frames()
        case Target.RABBITMQ_STREAM:
            return rabbit_frames()
        case Target.IGGY_VSR | Target.IGGY_LEGACY:
            return iggy_frames(target.iggy_era)
        case Target.ROG:
            return rog_frames()


# --- where each framing keeps its sizes ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SizeField:
    offset: int
    fmt: str  # struct format of the field

    def put(self, frame: bytes, value: int) -> bytes:
        size = struct.calcsize(self.fmt)
        if len(frame) < self.offset + size:
            return frame
        bits = size * 8
        packed = struct.pack(self.fmt.replace("i", "I").replace("q", "Q"), value % (1 << bits))
        return frame[: self.offset] + packed + frame[self.offset + size :]


def size_fields(target: Target, frame: bytes) -> list[SizeField]:
    """The frame's own size field, and for Rog (no frame size: rog.md §1) the name and data
    lengths of the request."""
    match target:
        case Target.KAFKA | Target.RABBITMQ_STREAM:
            return [SizeField(0, ">i")]
        case Target.IGGY_VSR:
            return [SizeField(48, "<I")]  # the whole frame's size (iggy.md §3.1)
        case Target.IGGY_LEGACY:
            return [SizeField(0, "<I")]
        case Target.ROG:
            fields = [SizeField(2, ">B")]
            if frame[:1] == b"\x01" and len(frame) > 2:  # publish: data_len u64 after the name
                fields.append(SizeField(3 + frame[2], ">Q"))
            elif len(frame) > 2:  # fetch, ack: the group's u8 length after the name
                fields.append(SizeField(3 + frame[2], ">B"))
            return fields


def declare(target: Target, frame: bytes, size: int) -> bytes:
    """``frame`` with its size field(s) saying ``size`` bytes follow (the whole frame's size for
    VSR, which counts its header)."""
    fields = size_fields(target, frame)
    field = fields[-1]
    if target is Target.IGGY_VSR:
        size += 256
    return field.put(frame, size)


# --- mutations ---------------------------------------------------------------------------------

INTERESTING = (0, 1, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF)


@dataclass(frozen=True, slots=True)
class Case:
    """One fuzz connection: the bytes, and whether the client then half-closes (EOF) or waits.
    ``incomplete``: a strict prefix of a valid frame, no EOF (the gateway can only close it at
    the request deadline, or earlier)."""

    kind: str
    data: bytes
    eof: bool = False
    incomplete: bool = False


def _bit_flips(rng: random.Random, frame: bytes) -> bytes:
    out = bytearray(frame)
    for _ in range(rng.choice((1, 1, 2, 4, 8))):
        i = rng.randrange(len(out))
        out[i] ^= 1 << rng.randrange(8)
    return bytes(out)


def _insert(rng: random.Random, frame: bytes) -> bytes:
    i = rng.randrange(len(frame) + 1)
    return frame[:i] + rng.randbytes(rng.randint(1, 16)) + frame[i:]


def _delete(rng: random.Random, frame: bytes) -> bytes:
    i = rng.randrange(len(frame))
    return frame[:i] + frame[i + rng.randint(1, 16) :]


def _overwrite(rng: random.Random, frame: bytes) -> bytes:
    """A 1, 2 or 4-byte field somewhere set to an edge value."""
    width = rng.choice((1, 2, 4))
    i = rng.randrange(max(1, len(frame) - width + 1))
    value = rng.choice(INTERESTING) % (1 << (8 * width))
    packed = value.to_bytes(width, rng.choice(("big", "little")))
    return frame[:i] + packed + frame[i + width :]


def mutate(target: Target, rng: random.Random, frames: tuple[bytes, ...]) -> Case:
    """One case from ``frames`` (valid ones, as the connection would send them now)."""
    frame = rng.choice(frames)
    roll = rng.random()
    if roll < 0.25:
        return Case("bit-flip", _bit_flips(rng, frame), eof=rng.random() < 0.3)
    if roll < 0.35:
        return Case("insert", _insert(rng, frame), eof=rng.random() < 0.3)
    if roll < 0.45:
        return Case("delete", _delete(rng, frame), eof=rng.random() < 0.3)
    if roll < 0.55:
        return Case("overwrite", _overwrite(rng, frame), eof=rng.random() < 0.3)
    if roll < 0.65:
        field = rng.choice(size_fields(target, frame))
        value = rng.choice((0, -1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 2**63, 2**64 - 1, 1, 3))
        return Case("size-field", field.put(frame, value), eof=rng.random() < 0.5)
    if roll < 0.72:
        cut = rng.randrange(1, len(frame)) if len(frame) > 1 else 0
        return Case("truncated+eof", frame[:cut], eof=True)
    if roll < 0.78:
        cut = rng.randrange(1, len(frame)) if len(frame) > 1 else 0
        return Case("truncated", frame[:cut], incomplete=cut > 0)
    if roll < 0.85:
        size = rng.choice((70 << 10, 1 << 20, 48 << 20, 63 << 20, 65 << 20, 1 << 31))
        head = declare(target, frame, size)
        # Rog's fetch and ack have no size above a byte: a "declared size" there is a group's.
        body = rng.randbytes(rng.choice((0, 1024, 65536)))
        sized = target is not Target.ROG or frame[:1] == b"\x01"
        return Case("oversized", head + body, incomplete=sized and size > len(head + body))
    if roll < 0.92:
        return Case("garbage", rng.randbytes(rng.choice((1, 3, 7, 64, 300, 4096))), eof=True)
    # Two frames in one write, the second one mutated (pipelined garbage after a good request).
    other = _bit_flips(rng, rng.choice(frames))
    return Case("pipelined", frame + other, eof=rng.random() < 0.3)


Mutator = Callable[[random.Random, bytes], bytes]
MUTATORS: dict[str, Mutator] = {
    "bit-flip": _bit_flips,
    "insert": _insert,
    "delete": _delete,
    "overwrite": _overwrite,
}

__all__ = [
    "MUTATORS",
    "Case",
    "SizeField",
    "Target",
    "declare",
    "iggy_commands",
    "mutate",
    "size_fields",
    "valid_frames",
]
