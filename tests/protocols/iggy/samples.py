"""One or more hand-made instances of every Iggy frame class, per era, for the three-way and
completeness tests (the hypothesis tests generate the rest)."""

from __future__ import annotations

from dataclasses import replace

from protocols.iggy import (
    Balanced,
    CacheMetrics,
    ChangePassword,
    ClientConsumerGroup,
    ClientDetails,
    ClientInfo,
    Clients,
    ClusterMetadata,
    ClusterNode,
    Command,
    Consumer,
    ConsumerGroup,
    ConsumerGroupAssignment,
    ConsumerGroupDetails,
    ConsumerGroupMember,
    ConsumerGroups,
    ConsumerKind,
    ConsumerOffsetInfo,
    CreateConsumerGroup,
    CreatePartitions,
    CreatePersonalAccessToken,
    CreateStream,
    CreateTopic,
    CreateUser,
    DeleteConsumerGroup,
    DeleteConsumerOffset,
    DeletePartitions,
    DeletePersonalAccessToken,
    DeleteSegments,
    DeleteStream,
    DeleteTopic,
    DeleteUser,
    DescribeOptions,
    Era,
    FlushUnsavedBuffer,
    GetClient,
    GetClients,
    GetClusterMetadata,
    GetConsumerGroup,
    GetConsumerGroups,
    GetConsumerOffset,
    GetMe,
    GetPersonalAccessTokens,
    GetSnapshot,
    GetStats,
    GetStream,
    GetStreams,
    GetTopic,
    GetTopics,
    GetUser,
    GetUsers,
    GlobalPermissions,
    Header,
    HeaderKind,
    HeaderValue,
    IdentityInfo,
    JoinConsumerGroup,
    LeaveConsumerGroup,
    LoginRegister,
    LoginRegisterResponse,
    LoginRegisterWithPersonalAccessToken,
    LoginUser,
    LoginWithPersonalAccessToken,
    LogoutUser,
    Message,
    MessagesKey,
    OptionSpec,
    OptionSpecs,
    Partition,
    PartitionId,
    Permissions,
    PersonalAccessTokenInfo,
    PersonalAccessTokens,
    Ping,
    PolledMessages,
    PollingKind,
    PollingStrategy,
    PollMessages,
    PurgeStream,
    PurgeTopic,
    RawPersonalAccessToken,
    RawReply,
    ReplyBody,
    SendMessages,
    SendMessagesConfirmation,
    SendMessagesResponse,
    Snapshot,
    Stats,
    StoreConsumerOffset,
    Stream,
    StreamDetails,
    StreamPermissions,
    Streams,
    SyncConsumerGroup,
    Topic,
    TopicDetails,
    TopicPermissions,
    Topics,
    UnknownCommand,
    UpdatePermissions,
    UpdateStream,
    UpdateTopic,
    UpdateUser,
    UserInfo,
    UserInfoDetails,
    Users,
)

KV = (Header(key=HeaderValue.string("k"), value=HeaderValue.string("v")),)
TYPED = (
    Header(key=HeaderValue.string("n"), value=HeaderValue.integer(HeaderKind.INT64, -5)),
    Header(key=HeaderValue.raw(b"\x00\xff"), value=HeaderValue.boolean(True)),
    Header(key=HeaderValue.string("f"), value=HeaderValue.floating(HeaderKind.FLOAT64, 1.5)),
)
SINGLE = Consumer(kind=ConsumerKind.CONSUMER, id="reader")
GROUP = Consumer(kind=ConsumerKind.CONSUMER_GROUP, id=3)
PERMISSIONS = Permissions(
    global_permissions=GlobalPermissions(read_servers=True, poll_messages=True),
    streams=(
        StreamPermissions(stream_id=1, read_stream=True),
        StreamPermissions(
            stream_id=2,
            send_messages=True,
            topics=(
                TopicPermissions(topic_id=0, read_topic=True),
                TopicPermissions(topic_id=9, manage_topic=True, send_messages=True),
            ),
        ),
    ),
)


LOGIN = LoginRegister(
    protocol_version=0x2C00,
    sdk_name="rust-sdk",
    sdk_version="0.11.0",
    username="iggy",
    password="iggy",
    context=b"ctx",
)


def poll(era: Era) -> PollMessages:
    return PollMessages(
        consumer=GROUP,
        stream_id="s",
        topic_id="t",
        partition_id=2 if era is Era.A else None,
        strategy=PollingStrategy(kind=PollingKind.NEXT),
        count=100,
        auto_commit=True,
    )


def requests(era: Era) -> list[Command]:
    """Every request class that ``era`` carries."""
    common: list[Command] = [
        Ping(),
        GetStats(),
        GetSnapshot(compression=2, snapshot_types=(1, 2, 4)),
        GetClusterMetadata(),
        DescribeOptions(scope=1),
        GetMe(),
        GetClient(client_id=7),
        GetClients(),
        GetUser(user_id="bob"),
        GetUsers(),
        CreateUser(username="bob", password="secret", status=1, permissions=PERMISSIONS),
        CreateUser(username="eve", password="secret", status=2),
        DeleteUser(user_id=4),
        UpdateUser(user_id=4, username="bobby", status=2),
        UpdateUser(user_id="bob"),
        UpdatePermissions(user_id=4, permissions=PERMISSIONS),
        UpdatePermissions(user_id=4),
        ChangePassword(user_id="bob", current_password="old", new_password="new"),
        LogoutUser(),
        GetPersonalAccessTokens(),
        CreatePersonalAccessToken(name="ci", expiry=0),
        DeletePersonalAccessToken(name="ci"),
        FlushUnsavedBuffer(stream_id=1, topic_id="t", partition_id=0, fsync=True),
        GetConsumerOffset(consumer=SINGLE, stream_id=1, topic_id=2, partition_id=0),
        StoreConsumerOffset(consumer=GROUP, stream_id="s", topic_id="t", partition_id=1, offset=9),
        DeleteConsumerOffset(consumer=SINGLE, stream_id=1, topic_id=2, partition_id=3),
        GetStream(stream_id="orders"),
        GetStreams(),
        DeleteStream(stream_id=0),
        PurgeStream(stream_id="orders"),
        GetTopic(stream_id=0, topic_id="t"),
        GetTopics(stream_id=0),
        DeleteTopic(stream_id=0, topic_id=1),
        PurgeTopic(stream_id="s", topic_id="t"),
        CreatePartitions(stream_id=0, topic_id=0, partitions_count=3),
        DeletePartitions(stream_id=0, topic_id=0, partitions_count=1),
        DeleteSegments(stream_id=0, topic_id=0, partition_id=2, segments_count=5),
        GetConsumerGroup(stream_id=0, topic_id=0, group_id="g"),
        GetConsumerGroups(stream_id=0, topic_id=0),
        CreateConsumerGroup(stream_id=0, topic_id=0, name="g"),
        DeleteConsumerGroup(stream_id=0, topic_id=0, group_id=1),
        JoinConsumerGroup(stream_id=0, topic_id=0, group_id="g"),
        LeaveConsumerGroup(stream_id=0, topic_id=0, group_id="g"),
        UnknownCommand(code=999, payload=b"\x01\x02"),
        poll(era),
    ]
    headers = tuple(h for h in TYPED if h.key.kind is HeaderKind.STRING) if era is Era.A else TYPED
    messages: tuple[Message, ...] = (
        Message(id=1, payload=b"a", headers=headers, origin_timestamp=10),
        Message(id=2, payload=b"", origin_timestamp=15),
        Message(id=2**128 - 1, payload=bytes(range(256)) * 3, headers=KV, origin_timestamp=10),
    )
    if era is Era.A:
        messages = tuple(Message(id=m.id, payload=m.payload, headers=m.headers) for m in messages)
    common += [
        SendMessages(stream_id="s", topic_id=1, partitioning=PartitionId(id=0), messages=messages),
        SendMessages(stream_id="s", topic_id=1, partitioning=PartitionId(id=0), messages=()),
    ]
    if era is Era.C:
        return [
            *common,
            LOGIN,
            LoginRegisterWithPersonalAccessToken(
                protocol_version=0x2C00,
                sdk_name="rust-sdk",
                sdk_version="0.11.0",
                token="iggypat-123",
            ),
            SyncConsumerGroup(stream_id=0, topic_id=0, group_id="g"),
            CreateStream(name="s", options=KV),
            UpdateStream(stream_id=0, name="s2", options=KV),
            CreateTopic(stream_id=0, name="t", partitions_count=3, options=TYPED),
            UpdateTopic(stream_id=0, topic_id="t", name="t", options=KV),
        ]
    legacy: list[Command] = [
        LoginUser(username="iggy", password="iggy", version="0.10.0" if era is Era.B else "0.6.1"),
        LoginWithPersonalAccessToken(token="iggypat-123"),
        CreateStream(name="s", stream_id=5 if era is Era.A else 0),
        UpdateStream(stream_id=0, name="s2"),
        CreateTopic(
            stream_id=0,
            name="t",
            partitions_count=3,
            compression_algorithm=2,
            message_expiry=2**64 - 1,
            max_topic_size=1 << 30,
            replication_factor=1,
            topic_id=4 if era is Era.A else 0,
        ),
        UpdateTopic(stream_id=0, topic_id="t", name="t2", replication_factor=3),
        SendMessages(stream_id=0, topic_id=0, partitioning=Balanced(), messages=messages[:1]),
        SendMessages(
            stream_id=0, topic_id=0, partitioning=MessagesKey(key=b"k"), messages=messages[:1]
        ),
    ]
    return common + legacy


STREAM = Stream(id=1, created_at=2, topics_count=1, size_bytes=3, messages_count=4, name="s")
TOPIC = Topic(
    id=0,
    created_at=5,
    partitions_count=2,
    message_expiry=0,
    compression_algorithm=1,
    max_topic_size=2**64 - 1,
    size_bytes=6,
    messages_count=7,
    name="t",
)
PARTITIONS = tuple(
    Partition(
        id=i, created_at=5, segments_count=1, current_offset=9, size_bytes=1, messages_count=10
    )
    for i in range(2)
)
GROUP_DETAILS = ConsumerGroupDetails(
    group=ConsumerGroup(id=1, partitions_count=3, members_count=2, name="g"),
    members=(
        ConsumerGroupMember(id=1, partitions=(0, 2)),
        ConsumerGroupMember(id=2, partitions=(1,)),
    ),
)
CLIENT = ClientInfo(
    client_id=1, user_id=0, transport=1, address="127.0.0.1:5000", consumer_groups_count=1
)
USER = UserInfo(id=1, created_at=2, status=1, username="bob")


def _stats(era: Era) -> Stats:
    stats = Stats(
        process_id=1,
        cpu_usage=0.5,
        total_cpu_usage=1.25,
        memory_usage=2,
        total_memory=3,
        available_memory=4,
        run_time=5,
        start_time=6,
        read_bytes=7,
        written_bytes=8,
        messages_size_bytes=9,
        streams_count=10,
        topics_count=11,
        partitions_count=12,
        segments_count=13,
        messages_count=14,
        clients_count=15,
        consumer_groups_count=16,
        hostname="gw",
        os_name="Linux",
        os_version="6",
        kernel_version="6.1",
        iggy_server_version="0.9.0",
        iggy_server_semver=0x2400,
        cache_metrics=(
            CacheMetrics(stream_id=1, topic_id=2, partition_id=3, hits=4, misses=5, hit_ratio=0.75),
        ),
    )
    if era is Era.C:
        return replace(stats, threads_count=8, free_disk_space=1, total_disk_space=2)
    return stats


def replies(era: Era) -> list[tuple[Command, ReplyBody]]:
    """Every reply class ``era`` carries, with a request it answers."""
    c = era is Era.C
    stream = (
        Stream(
            id=1,
            created_at=2,
            topics_count=1,
            size_bytes=3,
            messages_count=4,
            name="s",
            options=KV,
        )
        if c
        else STREAM
    )
    topic = (
        replace(TOPIC, options=KV, derived_options=TYPED)
        if c
        else replace(TOPIC, replication_factor=1)
    )
    polled = [
        Message(id=1, payload=b"x", headers=KV, offset=5, timestamp=100, origin_timestamp=90),
        Message(id=2, payload=b"", offset=6, timestamp=100, origin_timestamp=99),
        Message(id=3, payload=b"later", offset=9, timestamp=200, origin_timestamp=199),
    ]
    if era is Era.A:
        polled = [
            Message(id=m.id, payload=m.payload, offset=m.offset, timestamp=m.timestamp, state=1)
            for m in polled
        ]
    out: list[tuple[Command, ReplyBody]] = [
        (GetStats(), _stats(era)),
        (GetSnapshot(compression=1, snapshot_types=()), Snapshot(data=b"PK\x03\x04")),
        (
            GetClusterMetadata(),
            ClusterMetadata(
                name="streamgate",
                nodes=(
                    ClusterNode(
                        name="gw",
                        ip="127.0.0.1",
                        tcp_port=8090,
                        quic_port=8080,
                        http_port=3000,
                        websocket_port=8092,
                        role=0,
                        status=0,
                    ),
                ),
            ),
        ),
        (
            DescribeOptions(scope=1),
            OptionSpecs(
                specs=(
                    OptionSpec(key="durability", kind=2, default=b"replicated", description="d"),
                )
            ),
        ),
        (
            GetMe(),
            ClientDetails(
                client=CLIENT,
                consumer_groups=(ClientConsumerGroup(stream_id=0, topic_id=1, group_id=2),),
            ),
        ),
        (GetClients(), Clients(clients=(CLIENT, CLIENT))),
        (GetUser(user_id=1), UserInfoDetails(user=USER, permissions=PERMISSIONS)),
        (CreateUser(username="bob", password="pw!", status=1), UserInfoDetails(user=USER)),
        (GetUsers(), Users(users=(USER,))),
        (
            GetPersonalAccessTokens(),
            PersonalAccessTokens(tokens=(PersonalAccessTokenInfo(name="ci", expiry_at=0),)),
        ),
        (CreatePersonalAccessToken(name="ci", expiry=1), RawPersonalAccessToken(token="iggypat-x")),
        (poll(era), PolledMessages(partition_id=1, current_offset=9, messages=tuple(polled))),
        (poll(era), PolledMessages(partition_id=0xFFFFFFFF, current_offset=0)),
        (
            GetConsumerOffset(consumer=SINGLE, stream_id=0, topic_id=0, partition_id=None),
            ConsumerOffsetInfo(partition_id=0, current_offset=10, stored_offset=4),
        ),
        (GetStream(stream_id=1), StreamDetails(stream=stream, topics=(topic,))),
        (CreateStream(name="s"), StreamDetails(stream=stream, topics=(topic,))),
        (GetStreams(), Streams(streams=(stream, stream))),
        (GetTopic(stream_id=0, topic_id=0), TopicDetails(topic=topic, partitions=PARTITIONS)),
        (GetTopics(stream_id=0), Topics(topics=(topic, topic))),
        (GetConsumerGroup(stream_id=0, topic_id=0, group_id=1), GROUP_DETAILS),
        (CreateConsumerGroup(stream_id=0, topic_id=0, name="g"), GROUP_DETAILS),
        (GetConsumerGroups(stream_id=0, topic_id=0), ConsumerGroups(groups=(GROUP_DETAILS.group,))),
        (UnknownCommand(code=999, payload=b""), RawReply(payload=b"\x00raw")),
    ]
    if c:
        send = SendMessages(stream_id=0, topic_id=0, partitioning=PartitionId(id=0), messages=())
        out += [
            (
                LOGIN,
                LoginRegisterResponse(
                    user_id=0, session=7, server_protocol_version=0x2C00, server_version="0.9"
                ),
            ),
            (
                SyncConsumerGroup(stream_id=0, topic_id=0, group_id="g"),
                ConsumerGroupAssignment(generation=3, partitions=(0, 1, 2)),
            ),
            (
                send,
                SendMessagesResponse(
                    confirmations=(
                        SendMessagesConfirmation(
                            stream_id=0, topic_id=1, partition_id=0, base_offset=100
                        ),
                    )
                ),
            ),
        ]
    else:
        out += [
            (
                LoginUser(username="iggy", password="iggy", version="0.10.0"),
                IdentityInfo(user_id=3),
            ),
            (LoginWithPersonalAccessToken(token="iggypat-1"), IdentityInfo(user_id=3)),
        ]
    return out
