"""Async context managers (a gateway process, a backend) held open by trio in a thread of their
own, for the pipeline tests, which are synchronous: Spark's API blocks."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager
from typing import Final, Generic, TypeVar

import trio

T = TypeVar("T")

START_LIMIT_S: Final = 60.0
STOP_LIMIT_S: Final = 30.0


class _Holder(Generic[T]):
    def __init__(self, factory: Callable[[], AbstractAsyncContextManager[T]]) -> None:
        self.factory = factory
        self.value: T | None = None
        self.error: BaseException | None = None
        self.ready = threading.Event()
        self.token: trio.lowlevel.TrioToken | None = None
        self.stop: trio.Event | None = None

    def main(self) -> None:
        try:
            trio.run(self._serve)
        except BaseException as exc:
            self.error = exc
        finally:
            self.ready.set()

    async def _serve(self) -> None:
        self.stop = trio.Event()
        self.token = trio.lowlevel.current_trio_token()
        async with self.factory() as value:
            self.value = value
            self.ready.set()
            await self.stop.wait()


@contextlib.contextmanager
def held(factory: Callable[[], AbstractAsyncContextManager[T]]) -> Iterator[T]:
    """``async with factory() as value``, in a thread; ``value`` here until the block ends."""
    holder = _Holder(factory)
    thread = threading.Thread(target=holder.main, name="test-held", daemon=True)
    thread.start()
    if not holder.ready.wait(START_LIMIT_S):
        raise RuntimeError(f"{factory} did not start within {START_LIMIT_S} s")
    if holder.value is None:
        thread.join(STOP_LIMIT_S)
        raise RuntimeError(f"{factory} did not start") from holder.error
    try:
        yield holder.value
    finally:
        if holder.token is not None and holder.stop is not None:
            with contextlib.suppress(trio.RunFinishedError):
                trio.from_thread.run_sync(holder.stop.set, trio_token=holder.token)
        thread.join(STOP_LIMIT_S)
        if holder.error is not None:
            raise holder.error
