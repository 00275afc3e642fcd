"""Run as a child process by test_owner: opens the store, records a Kafka listener in its lock
file, prints ``ready`` and waits to be killed."""

from __future__ import annotations

import sys

import trio

from gateway.backends.embedded import Listener, open_embedded


async def main(root: str) -> None:
    async with open_embedded(root, fsync="never") as backend:
        await backend.record_listeners([Listener("kafka", "127.0.0.1", 9092, stream="default")])
        print("ready", flush=True)
        await trio.sleep_forever()


if __name__ == "__main__":
    trio.run(main, sys.argv[1])
