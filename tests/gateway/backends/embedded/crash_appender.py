"""Run as a child process by test_recovery: appends batches until it is killed.

Prints the last offset of every acknowledged append on its own line (flushed), so the parent
knows exactly what the store acknowledged before the SIGKILL.
"""

from __future__ import annotations

import sys

import trio

from gateway.backends.embedded import open_embedded

from .support import append, batch, create


async def main(root: str) -> None:
    async with open_embedded(root, fsync="never") as backend:
        await create(backend)
        offset = 0
        while True:
            offset = await append(backend, batch(10, start=offset)) + 10
            print(offset - 1, flush=True)


if __name__ == "__main__":
    trio.run(main, sys.argv[1])
