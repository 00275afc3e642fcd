"""One client command's life: build the backend from its URL, start it, wait (bounded) until it
answers, run the command, stop it; every failure becomes one ``streamgate: <message>`` line."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Final

import trio

from gateway.backends.base import Backend, shown_url
from gateway.backends.embedded import StoreInUse
from gateway.backends.url import BackendUrlError, create_backend
from gateway.model import DEFAULT_STREAM, BackendUnavailable, GatewayError

_PING_EVERY_S: Final = 0.1

Handler = Callable[[Backend, argparse.Namespace], Awaitable[int]]


class ClientError(Exception):
    """A failure the command itself reports (missing topic for delete, bad input): one line."""


@asynccontextmanager
async def connected(url: str, timeout_s: float) -> AsyncIterator[Backend]:
    """The backend of ``url``, started and answering its ``ping``, within ``timeout_s``; stopped
    on exit. The body's own exception comes out as it is, not in an ExceptionGroup."""
    try:
        backend = create_backend(url)
    except BackendUrlError as exc:
        raise ClientError(str(exc)) from None
    failure: BaseException | None = None
    body_error: BaseException | None = None
    reasons: list[str] = []
    async with trio.open_nursery() as nursery:
        try:
            with trio.fail_after(timeout_s):
                await nursery.start(backend.run)
                await _until_answering(backend, reasons)
        except trio.TooSlowError:
            why = f": {reasons[-1]}" if reasons else ""
            failure = BackendUnavailable(
                f"no answer from {redacted(url)} within {timeout_s:g} s{why}"
            )
        except GatewayError as exc:
            failure = exc
        if failure is None:
            try:
                yield backend
            except BaseException as exc:
                body_error = exc
        nursery.cancel_scope.cancel()
    if failure is not None:
        raise failure
    if body_error is not None:
        raise body_error


def redacted(url: str) -> str:
    """``url`` fit for a message: its password, or a token in the user's place (Iggy's
    ``iggy://<token>@host``), replaced by ``***``, and its query left out (an option's value may
    be a secret whatever its name)."""
    return shown_url(url)


async def _until_answering(backend: Backend, reasons: list[str]) -> None:
    """``ping`` until it succeeds: the remote backends start even while their server is down
    (they reconnect in the background), so started does not mean reachable. The caller's
    deadline bounds it; each failure's reason goes to ``reasons`` for the message."""
    while True:
        try:
            await backend.ping()
            return
        except BackendUnavailable as exc:
            reasons.append(exc.message)
        await trio.sleep(_PING_EVERY_S)


def _through_listener(exc: StoreInUse, args: argparse.Namespace) -> str:
    """The default ``embedded:./data`` is a running gateway's: the URL of its Kafka listener
    when that serves the command's stream without SASL, with ``args`` moved onto it. Otherwise,
    or when the user named the endpoint, ``exc`` again, its hint for the command's stream."""
    owner = exc.owner
    named = getattr(args, "url_given", True)  # an endpoint the user named is never swapped
    url = None if owner is None or named else owner.kafka_url(args.stream)
    if owner is None or url is None:
        raise StoreInUse(exc.root, owner, stream=args.stream) from None
    # stdout stays the command's own (consume writes messages there): the note goes to stderr.
    print(f"streamgate: {exc.directory} is served by streamgate (pid {owner.pid}); "
          f"going through its listener {url}", file=sys.stderr, flush=True)  # fmt: skip
    args.url = url
    args.stream = DEFAULT_STREAM  # the Kafka backend's one namespace: the listener's stream
    return url


def _reported(exc: BaseException) -> BaseException | None:
    """What inside ``exc`` (possibly nested in groups) ends a command without a traceback: a
    ``GatewayError``, a ``ClientError``, an ``OSError`` (a store directory that cannot be made,
    a closed output pipe), or Ctrl-C."""
    if isinstance(exc, GatewayError | ClientError | OSError | KeyboardInterrupt):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _reported(inner)
            if found is not None:
                return found
    return None


def _message(exc: BaseException) -> str:
    if isinstance(exc, GatewayError):
        return exc.message
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    return str(exc)


def run_command(handler: Handler, args: argparse.Namespace) -> int:
    """Run ``handler`` on the backend of ``args.url``; the process exit code."""

    async def main() -> int:
        async with AsyncExitStack() as stack:
            try:
                backend = await stack.enter_async_context(connected(args.url, args.timeout))
            except StoreInUse as exc:
                url = _through_listener(exc, args)
                backend = await stack.enter_async_context(connected(url, args.timeout))
            return await handler(backend, args)

    try:
        return trio.run(main)
    except BaseException as exc:
        found = _reported(exc)
        if found is None:
            raise
        if isinstance(found, KeyboardInterrupt):  # Ctrl-C: the shell's code for SIGINT
            return 130
        if isinstance(found, BrokenPipeError):  # the reader went away (``| head``): done
            _silence_stdout()
            return 0
        print(f"streamgate: {_message(found)}", file=sys.stderr, flush=True)
        return 1


def _silence_stdout() -> None:
    """The reader of stdout went away (``| head``): point stdout at /dev/null so that the
    interpreter's final flush does not complain about the broken pipe."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
