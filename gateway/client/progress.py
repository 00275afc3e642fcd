"""The progress line of ``produce`` and ``consume``: one line on stderr, rewritten in place about
four times a second (messages, msg/s and MB/s over the last second), so stdout stays clean for
pipes. Shown when stderr is a terminal unless ``--no-progress``; ``--progress`` forces it."""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Final, TextIO

import trio

from .background import background

REFRESH_S: Final = 0.25
_WINDOW_S: Final = 1.0  # rates over the last second: they follow a change within a second


def wanted(flag: bool | None, stream: TextIO | None = None) -> bool:
    """``--progress`` / ``--no-progress`` when given, else whether ``stream`` is a terminal."""
    if flag is not None:
        return flag
    stream = stream if stream is not None else sys.stderr
    return stream.isatty()


class Progress:
    """Counts what a command moved; ``run`` draws the line while the command works."""

    def __init__(self, verb: str, *, enabled: bool, out: TextIO | None = None) -> None:
        self.verb = verb
        self.enabled = enabled
        self.out = out if out is not None else sys.stderr
        self.messages = 0
        self.bytes = 0
        self._started = 0.0
        self._samples: deque[tuple[float, int, int]] = deque()
        self._width = 0

    def start(self, now: float) -> None:
        """The clock starts at ``now`` (trio time) with nothing moved yet."""
        self._started = now
        self._samples.clear()
        self._samples.append((now, self.messages, self.bytes))

    def add(self, messages: int, nbytes: int) -> None:
        self.messages += messages
        self.bytes += nbytes

    def line(self, now: float) -> str:
        """The text of the line at ``now`` (trio time); keeps the samples the rates need."""
        samples = self._samples
        samples.append((now, self.messages, self.bytes))
        while len(samples) > 2 and now - samples[1][0] >= _WINDOW_S:
            samples.popleft()
        then, messages, nbytes = samples[0]
        span = max(now - then, 1e-9)
        rate = (self.messages - messages) / span
        mbps = (self.bytes - nbytes) / span / 1e6
        return (
            f"{self.verb} {self.messages:,} messages  {rate:,.0f} msg/s  {mbps:,.2f} MB/s"
            f"  ({self.bytes / 1e6:,.1f} MB in {now - self._started:,.1f} s)"
        )

    def _draw(self, text: str, *, end: str = "") -> None:
        # Pad over the previous line's tail instead of relying on terminal escapes: the line
        # may go to a file or a pipe when ``--progress`` forces it.
        pad = " " * max(0, self._width - len(text))
        self._width = len(text)
        self.out.write(f"\r{text}{pad}{end}")
        self.out.flush()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Redraw every ``REFRESH_S`` until cancelled (then ``finish`` draws the last one)."""
        self.start(trio.current_time())
        task_status.started()
        if not self.enabled:
            return
        while True:
            await trio.sleep(REFRESH_S)
            self._draw(self.line(trio.current_time()))

    def finish(self) -> None:
        """The final line, with the averages over the whole run, and a newline."""
        if not self.enabled:
            return
        now = trio.current_time()
        span = max(now - self._started, 1e-9)
        self._draw(
            f"{self.verb} {self.messages:,} messages  {self.messages / span:,.0f} msg/s"
            f"  {self.bytes / span / 1e6:,.2f} MB/s  ({self.bytes / 1e6:,.1f} MB in {span:,.1f} s)",
            end="\n",
        )


@asynccontextmanager
async def showing(progress: Progress) -> AsyncIterator[Progress]:
    """``progress`` drawn while the body runs, its final line after (also when the body fails:
    the error message then starts a line of its own)."""
    try:
        async with background() as nursery:
            await nursery.start(progress.run)
            yield progress
    finally:
        progress.finish()
