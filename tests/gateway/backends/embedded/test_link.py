"""The store link of ``--workers`` on the embedded backend (``backends.embedded.link``): its
frames, and a real store served over a real unix socket to a link backend in the same test —
commands, errors as their own classes, cancelled long polls, an owner that goes and comes back.
The processes (supervisor, owner, workers) with real clients: test_workers_embedded.py."""

from __future__ import annotations

import inspect
import pickle
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

import gateway.model as model
from gateway.backends import Backend, DataWaits, RecordDeletion, SharedLogs, Transactions
from gateway.backends.base import BackendSettings, BackendUrlError, running
from gateway.backends.embedded import open_embedded
from gateway.backends.embedded.link import METHODS, EmbeddedLink, serve_store, wire
from gateway.backends.url import create_backend
from gateway.model import (
    AwaitData,
    BackendUnavailable,
    GatewayError,
    ListOffsets,
    OffsetOutOfRange,
    OffsetSpec,
    Read,
    Topic,
    UnknownTopic,
)

from .support import TOPIC, append, assert_intact, batch, create, read_all


def whole(frame: Any) -> bytes:
    return b"".join(wire.encode(frame))


def test_frames_come_back_whole_byte_by_byte_and_with_views_as_bytes() -> None:
    stored = bytearray(b"0123456789")
    frames = [(wire.REQUEST, 1, "read", Read(topic=TOPIC, partition=0, offset=3)),
              (wire.RESULT, 1, [memoryview(stored)[2:6], b"in band", memoryview(stored)[7:]]),
              (wire.RESULT, 2, memoryview(b"abcdef")[::2]),  # not contiguous: in the pickle
              (wire.CANCEL, 7)]  # fmt: skip
    # The stored views go out of band: a piece of their own each, not copied.
    pieces = wire.encode(frames[1])
    stored[2:3] = b"X"  # what the pieces show: the stored bytes themselves
    assert [bytes(p) for p in pieces[1:]] == [b"X345", b"789"]
    data = b"".join(whole(f) for f in frames)
    every = wire.Reader().feed(data)
    reader = wire.Reader()
    one_by_one = [f for i in range(len(data)) for f in reader.feed(data[i : i + 1])]
    assert every == one_by_one
    assert every[0] == frames[0] and every[3] == frames[3]
    assert every[1] == (wire.RESULT, 1, [b"X345", b"in band", b"789"])
    assert type(every[1][2][0]) is bytes
    assert every[2] == (wire.RESULT, 2, b"ace")


def _cut_short(frame: bytes) -> bytes:
    """The frame less its last byte, its size said to match: an out-of-band buffer runs short."""
    size = int.from_bytes(frame[:4], "big") - 1
    return size.to_bytes(4, "big") + frame[4:-1]


@pytest.mark.parametrize(
    "bad",
    [
        (1 << 31).to_bytes(4, "big") + b"x",  # longer than any frame may be
        (9).to_bytes(4, "big") + b"\x00\x00\x00\x05\x80\x05junk",  # not a pickle
        whole(["a list"]),  # a pickle, not a frame
        _cut_short(whole((wire.RESULT, 1, memoryview(b"xy")))),
    ],
    ids=["too long", "not a pickle", "not a tuple", "short buffer"],
)
def test_a_bad_frame_is_a_link_error(bad: bytes) -> None:
    with pytest.raises(wire.LinkError):
        wire.Reader().feed(bad)


@pytest.mark.parametrize(
    "frame",
    [
        (wire.REQUEST,),
        (wire.REQUEST, 1),
        (wire.REQUEST, 1, "ping"),  # no argument
        (wire.REQUEST, 1, "ping", None, "more"),
        (wire.REQUEST, "1", "ping", None),  # an id that is not an int
        (wire.REQUEST, 1, "close", None),  # not in the table: no method of the store's
        (wire.REQUEST, 1, b"ping", None),
        (wire.CANCEL,),
        (wire.CANCEL, 1, 2),
        (wire.RESULT, 1, None),  # an answer, from a worker
        (99, 1, "ping", None),
    ],
    ids=repr,
)
def test_a_worker_frame_of_another_shape_is_a_link_error(frame: tuple[Any, ...]) -> None:
    [back] = wire.Reader().feed(whole(frame))
    with pytest.raises(wire.LinkError, match="an unknown request"):
        wire.from_worker(back)


def test_the_worker_frames_the_owner_reads() -> None:
    assert wire.from_worker((wire.REQUEST, 7, "read", "x")) == (wire.REQUEST, 7, "read", "x")
    assert wire.from_worker((wire.CANCEL, 7)) == (wire.CANCEL, 7, "", None)
    # What is said of a bad frame is its shape, not its contents.
    with pytest.raises(wire.LinkError) as bad:
        wire.from_worker((wire.REQUEST, 1, "nope", b"secret" * 1000))
    assert "secret" not in str(bad.value) and "bytes" in str(bad.value)


@pytest.mark.parametrize(
    "frame",
    [(wire.RESULT,), (wire.RESULT, 1), (wire.ERROR, 1, "x", "y"), (wire.REQUEST, 1, "ping", None)],
    ids=repr,
)
def test_an_owner_frame_of_another_shape_is_a_link_error(frame: tuple[Any, ...]) -> None:
    with pytest.raises(wire.LinkError, match="an unknown answer"):
        wire.from_owner(frame)
    assert wire.from_owner((wire.RESULT, 3, b"v")) == (wire.RESULT, 3, b"v")


def _errors() -> list[type[GatewayError]]:
    return sorted(
        {c for _, c in inspect.getmembers(model, inspect.isclass) if issubclass(c, GatewayError)},
        key=lambda c: c.__name__,
    )


@pytest.mark.parametrize("cls", _errors(), ids=lambda c: c.__name__)
def test_every_gateway_error_crosses_the_link_as_itself(cls: type[GatewayError]) -> None:
    """A worker answers its client from the error's class and fields (Kafka error codes,
    OffsetOutOfRange's bounds): each must unpickle as it was."""
    error = cls("why it failed")
    for name in ("log_start", "log_end", "partitions", "member_id", "kind"):
        if hasattr(error, name):
            value = getattr(error, name)
            setattr(error, name, "x" if isinstance(value, str) else 7)
    [(_, _, back)] = wire.Reader().feed(whole((wire.ERROR, 1, error)))
    assert type(back) is cls and back.message == "why it failed"
    assert vars(back) == vars(error)


def test_the_link_offers_what_the_owner_serves() -> None:
    link = EmbeddedLink("/x", EmbeddedLink.from_url("embedded+owner:/x").capabilities)
    assert isinstance(link, Backend) and isinstance(link, DataWaits)
    assert isinstance(link, RecordDeletion) and isinstance(link, Transactions)
    assert isinstance(link, SharedLogs)
    for method in METHODS:
        assert callable(getattr(link, method)), method
    with pytest.raises(BackendUrlError, match="absolute socket path"):
        EmbeddedLink.from_url("embedded+owner:relative.sock")
    # The capabilities the owner has with the same settings.
    settings = BackendSettings(max_message_bytes=1 << 20, segment_bytes=1 << 22)
    via_url = create_backend("embedded+owner:/x", settings)
    assert isinstance(via_url, EmbeddedLink)
    assert via_url.capabilities.max_message_bytes == 1 << 20
    assert via_url.capabilities.segment_bytes == 1 << 22


@asynccontextmanager
async def served(root: Path, sock: Path) -> AsyncIterator[trio.Nursery]:
    async with open_embedded(root, fsync="never") as store, trio.open_nursery() as nursery:
        await nursery.start(serve_store, store, str(sock))
        yield nursery
        nursery.cancel_scope.cancel()


async def test_commands_results_and_errors_through_the_link(tmp_path: Path) -> None:
    sock = tmp_path / "store.sock"
    with trio.fail_after(20):
        async with served(tmp_path / "data", sock):
            assert sock.stat().st_mode & 0o777 == 0o600
            link = EmbeddedLink.from_url(f"embedded+owner:{sock}")
            async with running(link):
                await link.ping()
                with pytest.raises((pickle.PicklingError, AttributeError)):
                    await link.stats(lambda: None)  # a bug of the caller's: not sent at all
                assert not link._pending
                await create(link)  # type: ignore[arg-type]
                await append(link, batch(30))  # type: ignore[arg-type]
                await append(link, batch(20, start=30))  # type: ignore[arg-type]
                got = await read_all(link)  # type: ignore[arg-type]
                assert_intact(got)
                assert len(got) == 50
                end = await link.list_offsets(
                    ListOffsets(topic=TOPIC, partition=0, spec=OffsetSpec.LATEST)
                )
                assert end.offset == 50
                with pytest.raises(OffsetOutOfRange) as out:
                    await link.read(Read(topic=TOPIC, partition=0, offset=99))
                assert (out.value.log_start, out.value.log_end) == (0, 50)
                with pytest.raises(UnknownTopic):
                    await link.read(Read(topic=Topic("s", "nope"), partition=0, offset=0))


async def test_a_bad_frame_closes_its_own_link_and_the_owner_serves_on(tmp_path: Path) -> None:
    sock = tmp_path / "store.sock"
    with trio.fail_after(20):
        async with served(tmp_path / "data", sock):
            link = EmbeddedLink.from_url(f"embedded+owner:{sock}")
            async with running(link):
                await create(link)  # type: ignore[arg-type]
                for bad in [(wire.REQUEST, 1), (wire.CANCEL,), (wire.REQUEST, 1, "close", None)]:
                    raw = await trio.open_unix_socket(str(sock))
                    async with raw:
                        await raw.send_all(whole(bad))
                        assert await raw.receive_some(1024) == b""  # closed, nothing answered
                await append(link, batch(3))  # type: ignore[arg-type]
                assert len(await read_all(link)) == 3  # type: ignore[arg-type]


async def test_a_cancelled_long_poll_is_cancelled_in_the_owner_too(tmp_path: Path) -> None:
    sock = tmp_path / "store.sock"
    with trio.fail_after(20):
        async with (
            open_embedded(tmp_path / "data", fsync="never") as store,
            trio.open_nursery() as nursery,
        ):
            await nursery.start(serve_store, store, str(sock))
            link = EmbeddedLink.from_url(f"embedded+owner:{sock}")
            async with running(link):
                await create(link)  # type: ignore[arg-type]
                part = store.store.partition(TOPIC, 0)
                with trio.move_on_after(0.3):
                    await link.await_data(AwaitData(targets=((TOPIC, 0, 0),), max_wait_ms=60_000))
                # The owner's wait ended with the worker's: nobody watches the partition.
                give_up = trio.current_time() + 5
                while part._watchers:
                    assert trio.current_time() < give_up
                    await trio.sleep(0.01)
                # and the link goes on answering
                await append(link, batch(1))  # type: ignore[arg-type]
                assert len(await read_all(link)) == 1  # type: ignore[arg-type]
            nursery.cancel_scope.cancel()


async def test_an_owner_that_goes_is_unavailable_then_reached_again(tmp_path: Path) -> None:
    sock = tmp_path / "store.sock"

    async def owner(*, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
        async with open_embedded(tmp_path / "data", fsync="never") as store:
            await serve_store(store, str(sock), task_status=task_status)

    with trio.fail_after(30):
        link = EmbeddedLink.from_url(f"embedded+owner:{sock}")
        with pytest.raises(BackendUnavailable, match="not reachable"):
            await link.run()  # no owner yet: a worker does not start
        async with trio.open_nursery() as nursery:
            first = trio.CancelScope()

            gone = trio.Event()

            async def first_owner(*, task_status: trio.TaskStatus[str]) -> None:
                with first:
                    await owner(task_status=task_status)
                gone.set()  # its store closed, its lock dropped

            await nursery.start(first_owner)
            async with running(link):
                await create(link)  # type: ignore[arg-type]
                await append(link, batch(5))  # type: ignore[arg-type]
                first.cancel()  # the owner goes
                while True:  # every request fails while it is gone; none hangs
                    try:
                        await link.ping()
                    except BackendUnavailable:
                        break
                    await trio.sleep(0.02)
                await gone.wait()
                await nursery.start(owner)  # started again: the link finds it by itself
                while True:
                    try:
                        assert_intact(await read_all(link))  # type: ignore[arg-type]
                        break
                    except BackendUnavailable:
                        await trio.sleep(0.05)
                assert len(await read_all(link)) == 5  # type: ignore[arg-type]
            nursery.cancel_scope.cancel()
