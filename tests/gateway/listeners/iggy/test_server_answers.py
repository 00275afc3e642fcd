"""Issue 19: the Iggy listener answers as the real server does where apache-iggy 0.9.0's own
tests and the cross-SDK scenarios saw it differ: InvalidCommand for a code Iggy does not define,
ConsumerGroupIdNotFound however a group is named, an empty topic list for a missing stream,
UnsupportedOptionKey for stream and user options, Iggy's size strings, InvalidTopicSize,
resolved (never ServerDefault) topic settings, µs expiries, ConsumerOffsetNotFound, and
usernames limited in bytes. Through the real client where it can say it, raw frames otherwise.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
import trio
from apache_iggy import IggyExpiry, MaxTopicSize, UserStatus

from gateway.app import Running
from protocols.iggy import (
    CommandCode,
    CreateStream,
    CreateTopic,
    CreateUser,
    Era,
    Status,
    UnknownCommand,
)
from protocols.iggy.frames_streams import DeleteSegments
from protocols.iggy.frames_system import GetSnapshot
from tests.helpers.iggy_wire import IggyWire

from .conftest import (
    SINGLE,
    Clients,
    consumer_target,
    delete_offset,
    run_iggy,
    store_offset,
    with_stream,
    with_topic,
)

UNDEFINED_CODE = 9999


# --- 1. command codes -----------------------------------------------------------------------------


async def test_a_code_iggy_does_not_define_is_invalid_command(gateway: Running) -> None:
    async def scenario(clients: Clients) -> None:
        client = await clients.connect()
        with pytest.raises(RuntimeError) as refused:
            await client.send_binary_request(UNDEFINED_CODE, b"")
        assert "invalid command" in str(refused.value).lower()
        await client.ping()  # the session goes on

    await run_iggy(gateway, scenario)


async def test_defined_but_unserved_commands_stay_feature_unavailable(gateway: Running) -> None:
    """GetSnapshot and DeleteSegments are Iggy's, not served here: 5, not 3. SyncConsumerGroup
    (606) does not exist in the classic framing (§9.2): there it is an undefined code."""
    with trio.fail_after(15):
        wire = await IggyWire.logged_in(gateway, Era.C)
        await wire.ok(CreateStream(name="unserved"))
        await wire.ok(CreateTopic(stream_id="unserved", name="t", partitions_count=1))
        snapshot = await wire.call(GetSnapshot(compression=1, snapshot_types=(1,)))
        assert snapshot.status == Status.FEATURE_UNAVAILABLE, snapshot
        segments = await wire.call(
            DeleteSegments(stream_id="unserved", topic_id="t", partition_id=0, segments_count=1)
        )
        assert segments.status == Status.FEATURE_UNAVAILABLE, segments
        await wire.aclose()

        legacy = await IggyWire.logged_in(gateway, Era.B)
        sync = CommandCode.SYNC_CONSUMER_GROUP
        reply = await legacy.call(UnknownCommand(code=sync, payload=b"\x01\x04\0\0\0\0" * 3))
        assert reply.status == Status.INVALID_COMMAND, reply
        await legacy.aclose()


# --- 2. not found -------------------------------------------------------------------------------


async def test_a_missing_group_named_by_name_is_consumer_group_id_not_found(
    gateway: Running,
) -> None:
    """5000 "Consumer group with ID: ..." for delete, join and leave, as the real server
    answers, not 5003 ConsumerGroupNameNotFound."""

    async def scenario(clients: Clients) -> None:
        client = await with_topic(clients)
        for call in (
            client.delete_consumer_group, client.join_consumer_group,
            client.leave_consumer_group,
        ):  # fmt: skip
            with pytest.raises(RuntimeError, match="Consumer group with ID"):
                await call("s", "t", "no-such-group")

    await run_iggy(gateway, scenario)


async def test_topics_of_a_missing_stream_are_an_empty_list(gateway: Running) -> None:
    async def scenario(clients: Clients) -> None:
        client = await with_topic(clients)
        assert await client.get_topics("no-such-stream") == []
        assert await client.get_topics(4321) == []
        assert [t.name for t in await client.get_topics("s")] == ["t"]

    await run_iggy(gateway, scenario)


# --- 3. options -----------------------------------------------------------------------------------


async def test_stream_and_user_options_are_unsupported_keys(gateway: Running) -> None:
    async def scenario(clients: Clients) -> None:
        client = await with_stream(clients)
        with pytest.raises(RuntimeError, match="Unsupported option key"):
            await client.update_stream("s", "renamed", options={"colour": "blue"})
        assert await client.get_stream("renamed") is None  # nothing of it applied
        await client.create_user("option-user", "option-pw", UserStatus.Active, None)
        with pytest.raises(RuntimeError, match="Unsupported option key"):
            await client.update_user("option-user", "other-name", options={"colour": "blue"})
        user = await client.get_user("option-user")
        assert user is not None and user.username == "option-user"
        await client.update_stream("s", "renamed")  # without options, as before
        assert await client.get_stream("renamed") is not None

    await run_iggy(gateway, scenario)


async def test_segment_size_takes_iggys_size_strings(gateway: Running) -> None:
    async def scenario(clients: Clients) -> None:
        client = await with_stream(clients)
        await client.create_topic("s", "mib", 1, options={"segment_size": "128 MiB"})
        await client.create_topic("s", "gb", 1, options={"segment_size": "1GB"})
        for name, size in (("mib", 128 << 20), ("gb", 1_000_000_000)):
            topic = await client.get_topic("s", name)
            assert topic is not None
            assert topic.options.to_scalar_dict()["segment_size"] == size
        with pytest.raises(RuntimeError):
            await client.create_topic("s", "bad", 1, options={"segment_size": "lots"})

    await run_iggy(gateway, scenario)


async def test_update_topic_takes_only_the_keys_a_server_lets_change(gateway: Running) -> None:
    async def scenario(clients: Clients) -> None:
        client = await with_topic(clients)
        await client.update_topic("s", "t", "t", options={"compression_algorithm": "gzip"})
        topic = await client.get_topic("s", "t")
        assert topic is not None and topic.compression_algorithm == "gzip"
        for key, value in (("segment_size", "2 MiB"), ("preallocate_segments", "true")):
            with pytest.raises(RuntimeError, match="Unsupported option key"):
                await client.update_topic("s", "t", "t", options={key: value})
        topic = await client.get_topic("s", "t")
        assert topic is not None and "segment_size" not in topic.options.to_scalar_dict()

    await run_iggy(gateway, scenario)


async def test_derived_options_say_what_the_topic_resolved(gateway: Running) -> None:
    async def scenario(clients: Clients) -> None:
        client = await with_stream(clients)
        await client.create_topic("s", "t", 1, options={"segment_size": "128 MiB"})
        topic = await client.get_topic("s", "t")
        assert topic is not None
        explicit = topic.options.to_scalar_dict()
        derived = topic.derived_options.to_scalar_dict()
        assert explicit["segment_size"] == 128 << 20  # beside the SDK's durability keys
        assert derived["max_topic_size"] == 2**64 - 1  # unlimited, as the store keeps it
        assert derived["message_expiry"] == 2**64 - 1  # never
        assert derived["compression_algorithm"] == "none"
        assert not set(derived) & set(explicit)  # what the client chose is explicit only

    await run_iggy(gateway, scenario)


async def test_partition_counts_out_of_range_are_too_many_partitions(gateway: Running) -> None:
    async def scenario(clients: Clients) -> None:
        client = await with_topic(clients)
        await client.create_partitions("s", "t", 2)
        for count in (0, 1001):
            for change in (client.create_partitions, client.delete_partitions):
                with pytest.raises(RuntimeError, match="Too many partitions"):
                    await change("s", "t", count)
        with pytest.raises(RuntimeError, match="Invalid partitions count"):
            await client.delete_partitions("s", "t", 5)  # more than the topic has
        topic = await client.get_topic("s", "t")
        assert topic is not None and topic.partitions_count == 3

    await run_iggy(gateway, scenario)


async def test_a_max_topic_size_below_the_segment_size_is_invalid_topic_size(
    gateway: Running,
) -> None:
    async def scenario(clients: Clients) -> None:
        client = await with_stream(clients)
        with pytest.raises(RuntimeError, match="cannot be lower than segment size"):
            await client.create_topic(
                "s", "small", 1, segment_size=10_000_000,
                max_topic_size=MaxTopicSize.Custom(1_000_000),
            )  # fmt: skip
        assert await client.get_topic("s", "small") is None
        await client.create_topic("s", "sized", 1, segment_size=1_000_000)
        with pytest.raises(RuntimeError, match="cannot be lower than segment size"):
            await client.update_topic("s", "sized", "sized", max_topic_size=MaxTopicSize.Custom(10))
        await client.update_topic(
            "s", "sized", "sized", max_topic_size=MaxTopicSize.Custom(5_000_000)
        )
        topic = await client.get_topic("s", "sized")
        assert topic is not None and isinstance(topic.max_topic_size, MaxTopicSize.Custom)
        assert topic.max_topic_size.bytes == 5_000_000
        # Without a segment size the topic gets the store's (64 MiB here; the server's 1 GiB):
        # a max size below it is refused too, on create and on update.
        with pytest.raises(RuntimeError, match="cannot be lower than segment size"):
            await client.create_topic("s", "tiny", 1, max_topic_size=MaxTopicSize.Custom(4563))
        assert await client.get_topic("s", "tiny") is None
        await client.create_topic("s", "plain", 1)
        with pytest.raises(RuntimeError, match="cannot be lower than segment size"):
            await client.update_topic(
                "s", "plain", "plain", max_topic_size=MaxTopicSize.Custom(1_000_000)
            )

    await run_iggy(gateway, scenario)


async def test_topics_report_resolved_settings_not_server_default(gateway: Running) -> None:
    async def scenario(clients: Clients) -> None:
        client = await with_topic(clients)
        topic = await client.get_topic("s", "t")
        assert topic is not None
        assert isinstance(topic.max_topic_size, MaxTopicSize.Unlimited), topic.max_topic_size
        assert isinstance(topic.message_expiry, IggyExpiry.NeverExpire), topic.message_expiry
        (listed,) = await client.get_topics("s")
        assert isinstance(listed.max_topic_size, MaxTopicSize.Unlimited)

    await run_iggy(gateway, scenario)


async def test_message_expiry_keeps_microseconds(gateway: Running) -> None:
    async def scenario(clients: Clients) -> None:
        client = await with_stream(clients)
        for name, expiry in (("one-us", timedelta(microseconds=1)),
                             ("odd", timedelta(seconds=1, microseconds=1))):  # fmt: skip
            await client.create_topic(
                "s", name, 1, message_expiry=IggyExpiry.ExpireDuration(expiry)
            )
            topic = await client.get_topic("s", name)
            assert topic is not None and isinstance(topic.message_expiry, IggyExpiry.ExpireDuration)
            assert topic.message_expiry.duration == expiry
        await client.update_topic(
            "s", "odd", "odd", message_expiry=IggyExpiry.ExpireDuration(timedelta(microseconds=7))
        )
        topic = await client.get_topic("s", "odd")
        assert topic is not None and isinstance(topic.message_expiry, IggyExpiry.ExpireDuration)
        assert topic.message_expiry.duration == timedelta(microseconds=7)

    await run_iggy(gateway, scenario)


# --- 4. offsets and usernames -----------------------------------------------------------------


async def test_deleting_an_offset_never_stored_is_consumer_offset_not_found(
    gateway: Running,
) -> None:
    async def scenario(clients: Clients) -> None:
        client = await with_topic(clients)
        target = consumer_target(SINGLE, "never-stored", "s", "t", 0)
        with pytest.raises(RuntimeError, match=r"Consumer offset .* was not found"):
            await delete_offset(client, target)
        await store_offset(client, target, 0)
        await delete_offset(client, target)  # stored: deleted
        with pytest.raises(RuntimeError, match=r"Consumer offset .* was not found"):
            await delete_offset(client, target)  # and gone

    await run_iggy(gateway, scenario)


async def test_usernames_are_limited_in_bytes(gateway: Running) -> None:
    """3..50 UTF-8 bytes, as the real server counts (Rust's ``str::len``): "éé" is 2
    characters but 4 bytes, and 26 "é" are 26 characters but 52 bytes."""

    async def scenario(clients: Clients) -> None:
        client = await clients.connect()
        short = await client.create_user("éé", "password", UserStatus.Active, None)
        assert short.username == "éé"

    await run_iggy(gateway, scenario)
    with trio.fail_after(10):
        wire = await IggyWire.logged_in(gateway, Era.C)
        reply = await wire.call(CreateUser(username="é" * 26, password="password", status=1))
        assert reply.status == Status.INVALID_USERNAME, reply
        at_limit = await wire.call(CreateUser(username="é" * 25, password="password", status=1))
        assert at_limit.status == Status.OK, at_limit
        await wire.aclose()
