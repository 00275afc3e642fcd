"""Iggy system, login, user and personal-access-token commands (iggy.md §5.1, §5.2, §3.5).

Users, permissions and tokens live in the gateway's UserStore (the same users Kafka SASL/PLAIN
logs in with); Iggy's permission model is checked on every command by ``Session.require``.
"""

from __future__ import annotations

import os
import platform
import resource
import shutil
import socket
import time

from gateway import __version__
from gateway.listeners.iggy.session import ClientState, CommandHandler, Session, handles
from gateway.model import Authenticate, InvalidRequest, Stats, UnknownUser
from gateway.translate.iggy import users as tu
from gateway.translate.iggy.topic_settings import check_no_options
from protocols.iggy import Command
from protocols.iggy import frames_system as fs
from protocols.iggy import frames_users as fu
from protocols.iggy.headers import HeaderKind


async def ping(s: Session, cmd: fs.Ping) -> None:
    return None


async def _password_login(s: Session, username: str, password: str) -> int:
    result = await s.router.execute(
        Authenticate(
            mechanism="PLAIN", username=username, secret=password.encode(), peer=s.conn.peer
        ),
        s.ctx,
    )
    s.log_in(s.users.get_user(result.user_id))
    return result.user_id


async def _token_login(s: Session, token: str) -> int:
    result = await s.router.execute(
        Authenticate(mechanism="TOKEN", secret=token.encode(), peer=s.conn.peer), s.ctx
    )
    s.log_in(s.users.get_user(result.user_id))
    return result.user_id


def _registered(s: Session, user_id: int, protocol_version: int) -> fs.LoginRegisterResponse:
    # The client's own protocol version is answered back: the gateway speaks whatever it asked.
    return fs.LoginRegisterResponse(
        user_id=user_id,
        session=s.service.new_session_number(),
        server_protocol_version=protocol_version,
        server_version=f"streamgate-{__version__}",
    )


async def login_user(s: Session, cmd: fs.LoginUser) -> fs.IdentityInfo:
    return fs.IdentityInfo(user_id=await _password_login(s, cmd.username, cmd.password))


async def login_token(s: Session, cmd: fs.LoginWithPersonalAccessToken) -> fs.IdentityInfo:
    return fs.IdentityInfo(user_id=await _token_login(s, cmd.token))


async def register(s: Session, cmd: fs.LoginRegister) -> fs.LoginRegisterResponse:
    user_id = await _password_login(s, cmd.username, cmd.password)
    return _registered(s, user_id, cmd.protocol_version)


async def register_token(
    s: Session, cmd: fs.LoginRegisterWithPersonalAccessToken
) -> fs.LoginRegisterResponse:
    return _registered(s, await _token_login(s, cmd.token), cmd.protocol_version)


async def logout(s: Session, cmd: fs.LogoutUser) -> None:
    s.log_out()


# --- system ---------------------------------------------------------------------------------------


def _memory() -> tuple[int, int, int]:
    """(resident bytes of this process, total, available) from /proc when there is one."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    total = available = 0
    try:
        with open("/proc/self/statm") as f:
            rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        with open("/proc/meminfo") as f:
            info = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in f}
        total, available = info.get("MemTotal", 0), info.get("MemAvailable", 0)
    except (OSError, ValueError, IndexError):
        pass
    return rss, total, available


async def get_stats(s: Session, cmd: fs.GetStats) -> fs.Stats:
    s.require("read_servers")
    stats = await s.router.execute(Stats(), s.ctx)
    rss, total, available = _memory()
    now_us = time.time_ns() // 1000
    cpu = os.times()
    run_s = max(1e-6, (now_us - s.service.started_us) / 1e6)
    try:
        disk = shutil.disk_usage(".")
        free_disk, total_disk = disk.free, disk.total
    except OSError:
        free_disk = total_disk = 0
    groups = sum(
        len(s.groups.list(t.topic.stream, t.topic.name))
        for info in await s.catalog.streams(s.ctx)
        for t in info.topics
    )
    return fs.Stats(
        process_id=os.getpid(),
        cpu_usage=100.0 * (cpu.user + cpu.system) / run_s,
        total_cpu_usage=0.0,
        memory_usage=rss,
        total_memory=total,
        available_memory=available,
        run_time=now_us - s.service.started_us,
        start_time=s.service.started_us,
        read_bytes=0,
        written_bytes=0,
        messages_size_bytes=stats.size_bytes,
        streams_count=stats.streams,
        topics_count=stats.topics,
        partitions_count=stats.partitions,
        segments_count=stats.partitions,
        messages_count=stats.messages,
        clients_count=len(s.service.clients),
        consumer_groups_count=groups,
        hostname=socket.gethostname(),
        os_name=platform.system(),
        os_version=platform.version(),
        kernel_version=platform.release(),
        iggy_server_version=f"streamgate-{__version__}",
        iggy_server_semver=0,
        threads_count=1,
        free_disk_space=free_disk,
        total_disk_space=total_disk,
    )


async def cluster_metadata(s: Session, cmd: fs.GetClusterMetadata) -> fs.ClusterMetadata:
    # One node, at the gateway's advertised address: the client never redirects (§5.1).
    name = s.service.settings.cluster_name
    node = fs.ClusterNode(
        name=name, ip=s.host, tcp_port=s.port, quic_port=0, http_port=0, websocket_port=0,
        role=0, status=0,
    )  # fmt: skip
    return fs.ClusterMetadata(name=name, nodes=(node,))


_TOPIC_OPTIONS = (
    ("compression_algorithm", HeaderKind.STRING, b"none", "none or gzip (stored, not applied)"),
    ("consumer_offset_durability", HeaderKind.STRING, b"replicated", "stored only"),
    ("durability", HeaderKind.STRING, b"replicated", "stored only"),
    ("max_topic_size", HeaderKind.UINT64, b"\xff" * 8, "bytes, split over the partitions"),
    ("message_expiry", HeaderKind.UINT64, b"\xff" * 8, "microseconds; retention time"),
    ("segment_size", HeaderKind.UINT64, (1 << 30).to_bytes(8, "little"), "segment bytes"),
)


async def describe_options(s: Session, cmd: fs.DescribeOptions) -> fs.OptionSpecs:
    if cmd.scope not in (1, 2, 3):
        raise InvalidRequest(f"unknown option scope {cmd.scope}")
    specs = _TOPIC_OPTIONS if cmd.scope == 1 else ()
    return fs.OptionSpecs(
        specs=tuple(
            fs.OptionSpec(key=k, kind=kind, default=d, description=text)
            for k, kind, d, text in specs
        )
    )


def _client_details(s: Session, client: ClientState) -> fs.ClientDetails:
    groups = []
    for g in s.groups.memberships(client.client_id):
        ids = s.service.group_ids.get((g.stream, g.topic))
        groups.append(
            fs.ClientConsumerGroup(
                stream_id=ids[0] if ids else 0, topic_id=ids[1] if ids else 0, group_id=g.id
            )
        )
    return fs.ClientDetails(client=_client_info(s, client), consumer_groups=tuple(groups))


def _client_info(s: Session, client: ClientState) -> fs.ClientInfo:
    return fs.ClientInfo(
        client_id=client.client_id,
        user_id=0xFFFFFFFF if client.user_id is None else client.user_id,
        transport=1,
        address=client.address,
        consumer_groups_count=len(s.groups.memberships(client.client_id)),
    )


async def get_me(s: Session, cmd: fs.GetMe) -> fs.ClientDetails:
    return _client_details(s, s.client)


async def get_client(s: Session, cmd: fs.GetClient) -> fs.ClientDetails | None:
    s.require("read_servers")
    client = s.service.clients.get(cmd.client_id)
    return None if client is None else _client_details(s, client)


async def get_clients(s: Session, cmd: fs.GetClients) -> fs.Clients:
    s.require("read_servers")
    clients = sorted(s.service.clients.values(), key=lambda c: c.client_id)
    return fs.Clients(clients=tuple(_client_info(s, c) for c in clients))


# --- users ----------------------------------------------------------------------------------------


async def get_user(s: Session, cmd: fu.GetUser) -> fu.UserInfoDetails | None:
    s.require("read_users")
    try:
        return tu.user_details(s.users.get_user(cmd.user_id))
    except UnknownUser:
        return None


async def get_users(s: Session, cmd: fu.GetUsers) -> fu.Users:
    s.require("read_users")
    return fu.Users(users=tuple(tu.user_info(u) for u in s.users.list_users()))


async def create_user(s: Session, cmd: fu.CreateUser) -> fu.UserInfoDetails:
    s.require("manage_users")
    check_no_options(cmd.options, "user")
    tu.check_username(cmd.username)
    tu.check_password(cmd.password)
    user = await s.users.create_user(
        cmd.username,
        cmd.password,
        status=tu.user_status(cmd.status),
        permissions=tu.gateway_permissions(cmd.permissions),
    )
    return tu.user_details(user)


async def update_user(s: Session, cmd: fu.UpdateUser) -> None:
    s.require("manage_users")
    check_no_options(cmd.options, "user")
    tu.check_username(cmd.username)
    status = None if cmd.status is None else tu.user_status(cmd.status)
    s.users.update_user(cmd.user_id, username=cmd.username, status=status)


async def update_permissions(s: Session, cmd: fu.UpdatePermissions) -> None:
    s.require("manage_users")
    s.users.update_permissions(cmd.user_id, tu.gateway_permissions(cmd.permissions))


async def delete_user(s: Session, cmd: fu.DeleteUser) -> None:
    s.require("manage_users")
    s.users.delete_user(cmd.user_id)


async def change_password(s: Session, cmd: fu.ChangePassword) -> None:
    assert s.user is not None
    target = s.users.get_user(cmd.user_id)
    if target.id != s.user.id:
        s.require("manage_users")
    tu.check_password(cmd.new_password)
    await s.users.change_password(target.id, cmd.current_password, cmd.new_password)


async def get_tokens(s: Session, cmd: fu.GetPersonalAccessTokens) -> fu.PersonalAccessTokens:
    assert s.user is not None
    return fu.PersonalAccessTokens(
        tokens=tuple(tu.token_info(t) for t in s.users.list_tokens(s.user.id))
    )


async def create_token(s: Session, cmd: fu.CreatePersonalAccessToken) -> fu.RawPersonalAccessToken:
    assert s.user is not None
    token = s.users.create_token(s.user.id, cmd.name, tu.token_expiry(cmd.expiry))
    return fu.RawPersonalAccessToken(token=token)


async def delete_token(s: Session, cmd: fu.DeletePersonalAccessToken) -> None:
    assert s.user is not None
    s.users.delete_token(s.user.id, cmd.name)


HANDLERS: dict[type[Command], CommandHandler[Command]] = dict(
    [
        handles(fs.Ping, ping),
        handles(fs.LoginUser, login_user),
        handles(fs.LoginWithPersonalAccessToken, login_token),
        handles(fs.LoginRegister, register),
        handles(fs.LoginRegisterWithPersonalAccessToken, register_token),
        handles(fs.LogoutUser, logout),
        handles(fs.GetStats, get_stats),
        handles(fs.GetClusterMetadata, cluster_metadata),
        handles(fs.DescribeOptions, describe_options),
        handles(fs.GetMe, get_me),
        handles(fs.GetClient, get_client),
        handles(fs.GetClients, get_clients),
        handles(fu.GetUser, get_user),
        handles(fu.GetUsers, get_users),
        handles(fu.CreateUser, create_user),
        handles(fu.UpdateUser, update_user),
        handles(fu.UpdatePermissions, update_permissions),
        handles(fu.DeleteUser, delete_user),
        handles(fu.ChangePassword, change_password),
        handles(fu.GetPersonalAccessTokens, get_tokens),
        handles(fu.CreatePersonalAccessToken, create_token),
        handles(fu.DeletePersonalAccessToken, delete_token),
    ]
)
