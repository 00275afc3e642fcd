"""What the older-client scripts share: arguments in, one JSON line out.

``python SCRIPT ADDRESS SCENARIO [JSON]`` runs ``SCENARIO(ADDRESS, **JSON)`` from the script's
table and prints its result as one JSON object (bytes as hex, so payloads come back exact).
Runs with the python of an older client's own venv: nothing here may import the gateway.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

Scenario = Callable[..., Awaitable[Any]]
Poll = Callable[..., Awaitable[list[dict[str, Any]]]]


async def logged_in(client: Any) -> Any:
    """Connect ``client`` and log in as the gateway's root user."""
    await client.connect()
    await client.login_user("iggy", "iggy")
    return client


def poller(polling: Any, describe: Callable[[Any], dict[str, Any]]) -> Poll:
    """A poll as the default consumer: both clients share ``poll_messages``' positional
    signature; ``polling`` is their PollingStrategy, ``describe`` turns a message into JSON."""
    strategies: dict[str, Callable[[int], Any]] = {
        "first": lambda _: polling.First(),
        "last": lambda _: polling.Last(),
        "next": lambda _: polling.Next(),
        "offset": lambda value: polling.Offset(value=value),
    }

    async def poll(
        client: Any,
        stream: str | int,
        topic: str | int,
        partition: int,
        strategy: str,
        value: int = 0,
        count: int = 100,
        auto_commit: bool = False,
    ) -> list[dict[str, Any]]:
        built = strategies[strategy](value)
        polled = await client.poll_messages(stream, topic, partition, built, count, auto_commit)
        return [describe(m) for m in polled]

    return poll


async def error_of(call: Awaitable[Any]) -> str | None:
    """The client's error text (these clients raise RuntimeError), or None if it succeeded."""
    try:
        await call
    except RuntimeError as exc:
        return str(exc)
    return None


def main(scenarios: dict[str, Scenario]) -> None:
    address, name = sys.argv[1], sys.argv[2]
    args = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
    result = asyncio.run(scenarios[name](address, **args))
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
    # iggy.md §1.1: tearing the Tokio runtime down while a heartbeat is in flight can abort the
    # process (rc 134). The result is out; leave without that teardown.
    os._exit(0)
