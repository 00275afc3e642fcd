"""``streamgate users grant|revoke``: flags at one level of Iggy's permission model."""

from __future__ import annotations

import pytest

from gateway.client.grants import changed, describe
from gateway.client.session import ClientError
from gateway.model.permissions import Permissions, grants


def test_grant_and_revoke_at_every_level() -> None:
    p = changed(Permissions(), ["read_streams"], on=True)
    p = changed(p, ["send_messages", "manage_streams"], on=True, stream=3)  # alias of the stream's
    p = changed(p, ["read_topics"], on=True, stream=3, topic=7)  # alias of the topic's
    assert describe(p) == (
        "global=read_streams stream:3=manage_stream,send_messages stream:3/topic:7=read_topic"
    )
    assert grants(p, "send_messages", 3, 1) and not grants(p, "send_messages", 4, 1)
    assert grants(p, "manage_topics", 3) and grants(p, "poll_messages", 3, 7)
    p = changed(p, ["all"], on=False, stream=3)
    assert describe(p) == "global=read_streams stream:3/topic:7=read_topic"
    p = changed(p, ["read_topic"], on=False, stream=3, topic=7)
    p = changed(p, ["all"], on=False)
    assert p == Permissions() and describe(p) == "-"


@pytest.mark.parametrize(
    ("names", "stream", "topic"),
    [(["fly"], None, None), (["manage_users"], 1, None), (["manage_stream"], 1, 2),
     (["read_topics"], None, 2)],
)  # fmt: skip
def test_a_flag_of_another_level_is_refused(
    names: list[str], stream: int | None, topic: int | None
) -> None:
    with pytest.raises(ClientError):
        changed(Permissions(), names, on=True, stream=stream, topic=topic)
