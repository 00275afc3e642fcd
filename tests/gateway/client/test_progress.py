"""The progress line: rates over the last second, drawn in place on its stream only."""

from __future__ import annotations

import io

import trio
import trio.testing

from gateway.client.progress import REFRESH_S, Progress, showing, wanted


def test_rates_are_over_the_last_second() -> None:
    p = Progress("produced", enabled=True, out=io.StringIO())
    p.start(0.0)
    p.add(1000, 1_000_000)
    assert p.line(1.0).startswith("produced 1,000 messages  1,000 msg/s  1.00 MB/s")
    p.add(4000, 4_000_000)
    line = p.line(2.0)  # the second second moved 4000: the rate follows it, not the average
    assert "5,000 messages  4,000 msg/s  4.00 MB/s" in line and "5.0 MB in 2.0 s" in line


def test_wanted_follows_the_flag_then_the_terminal() -> None:
    assert wanted(True, io.StringIO()) and not wanted(False, io.StringIO())
    assert not wanted(None, io.StringIO())  # not a terminal


async def test_redraws_in_place_then_ends_the_line(autojump_clock: trio.testing.MockClock) -> None:
    out = io.StringIO()
    async with showing(Progress("consumed", enabled=True, out=out)) as p:
        p.add(10, 100)
        await trio.sleep(REFRESH_S * 4.5)
    text = out.getvalue()
    assert text.count("\r") == 5 and text.endswith("\n") and text.count("\n") == 1
    assert text.rsplit("\r", 1)[-1].startswith("consumed 10 messages")


async def test_disabled_draws_nothing(autojump_clock: trio.testing.MockClock) -> None:
    out = io.StringIO()
    async with showing(Progress("consumed", enabled=False, out=out)) as p:
        p.add(10, 100)
        await trio.sleep(1)
    assert out.getvalue() == ""
