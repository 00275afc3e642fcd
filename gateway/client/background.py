"""A nursery for helper tasks (progress line, input reader, partition readers) that end with
the command's body, and do not wrap the body's own exception in an ExceptionGroup."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio


@asynccontextmanager
async def background() -> AsyncIterator[trio.Nursery]:
    """Yield a nursery; when the body ends its tasks are cancelled and the body's exception
    (a ``GatewayError``, a ``KeyboardInterrupt``) comes out as it is, so callers and the
    command's error report see it unwrapped."""
    body_error: BaseException | None = None
    async with trio.open_nursery() as nursery:
        try:
            yield nursery
        except BaseException as exc:
            body_error = exc
        finally:
            nursery.cancel_scope.cancel()
    if body_error is not None:
        raise body_error
