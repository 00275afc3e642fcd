"""Waiting for state another process or the kernel changes, where no event can be awaited."""

from __future__ import annotations

from collections.abc import Callable

import trio


async def eventually(predicate: Callable[[], bool], *, interval: float = 0.01) -> None:
    """Poll ``predicate``; callers bound it with ``trio.fail_after``. Only for state that has
    no event to await, such as a socket the kernel has not handed to the server yet."""
    while not predicate():  # noqa: ASYNC110
        await trio.sleep(interval)
