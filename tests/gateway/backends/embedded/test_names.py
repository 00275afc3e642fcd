"""Stream and topic names are arbitrary text: escaped on disk, never escaping the root."""

from __future__ import annotations

import re
from pathlib import Path

import trio
from hypothesis import given
from hypothesis import strategies as st

from gateway.backends.embedded import LOCK_FILE, open_embedded
from gateway.backends.embedded.files import escape_name
from gateway.model import ListTopics, Topic

from .support import append, assert_intact, batch, create, entries_under, read_all

NASTY = [
    "../x",
    "a/b",
    ".",
    "..",
    "...",
    ".hidden",
    "%2E",
    "%",
    "a b",
    "A",
    "a",
    "ünï/cødé",
    "日本語",
    "x" * 255,
    "é" * 127,
    "\\",
    "con",
    "trash",
    ".trash",
    "~2",
    "a~2",
    "0",
]
_ESCAPED = re.compile(r"[A-Za-z0-9_~%-]+")


def test_escape_is_safe_and_readable() -> None:
    assert escape_name("orders-2024_v1") == "orders-2024_v1"
    assert escape_name("../x") == "%2E%2E%2Fx"
    assert escape_name(".") == "%2E"
    assert escape_name("é") == "%C3%A9"
    for name in NASTY:
        e = escape_name(name)
        assert _ESCAPED.fullmatch(e) and not e.startswith(".") and len(e) <= 200, name


@given(
    st.lists(
        st.text(min_size=1, max_size=60).filter(lambda s: "\x00" not in s),
        min_size=2,
        max_size=5,
        unique=True,
    )
)
def test_escape_is_injective(names: list[str]) -> None:
    escaped = [escape_name(n) for n in names]
    assert len(set(escaped)) == len(escaped)
    assert all(_ESCAPED.fullmatch(e) and not e.startswith(".") for e in escaped)


async def test_nasty_names_round_trip_inside_the_root(tmp_path: Path) -> None:
    root = tmp_path / "store"
    topics = [Topic(stream, name) for stream in ("..", "s/../t") for name in NASTY]
    with trio.fail_after(20):
        async with open_embedded(root, fsync="never") as b:
            for k, topic in enumerate(topics):
                await create(b, topic=topic)
                await append(b, batch(k % 3 + 1), topic=topic)
        inside = root.resolve()
        for entry in entries_under(tmp_path):  # nothing outside the root, nothing hidden
            assert entry == inside or entry.is_relative_to(inside), entry
            assert entry.name in (".trash", LOCK_FILE) or not entry.name.startswith("."), entry
        async with open_embedded(root, fsync="never") as b:
            listed = {t.topic for t in (await b.list_topics(ListTopics())).topics}
            assert listed == set(topics)
            for k, topic in enumerate(topics):
                got = await read_all(b, topic=topic)
                assert len(got) == k % 3 + 1
                assert_intact(got)
