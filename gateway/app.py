"""Wires config -> backend -> router -> listeners -> admin HTTP in one nursery (STYLE.md)."""

from __future__ import annotations

import functools
import secrets
import signal
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog
import trio
from prometheus_client import CollectorRegistry

from gateway import runtime_gc
from gateway.access_log import AccessLog
from gateway.admin_http import Health, serve_admin
from gateway.authorization import (
    ANONYMOUS,
    Authorizer,
    anonymous_line,
    anonymous_permissions,
    requiring_authentication,
)
from gateway.backends import Backend, SharedLogs
from gateway.backends.base import BackendSettings, Retries
from gateway.backends.embedded import EmbeddedBackend, Listener, embedded_path
from gateway.backends.embedded.link import EmbeddedLink
from gateway.backends.topic_log import TopicLog
from gateway.backends.url import create_backend
from gateway.config import Config, TlsConfig
from gateway.coordination import (
    GroupCoordinator,
    GroupDefinitions,
    Groups,
    SharedGroups,
    UserStore,
)
from gateway.coordination.login_guard import LoginGuard, LoginLimits
from gateway.listen_error import naming_address
from gateway.listeners.connection import Drain, Handler, Limits
from gateway.listeners.fd_guard import FD_GUARD
from gateway.listeners.iggy import (
    IggyGroups,
    IggyService,
    IggySettings,
    LocalGroups,
    SharedIggyGroups,
)
from gateway.listeners.kafka import KafkaService, KafkaSettings
from gateway.listeners.rabbitmq_stream import RabbitStreamService, RabbitStreamSettings
from gateway.listeners.rog import RogService
from gateway.listeners.serve import ListenerInfo, serve_protocol
from gateway.metrics import Metrics
from gateway.model import DEFAULT_STREAM, Topic
from gateway.router import Router
from gateway.sampling import LagSampler, sample_runtime, watch_backend
from gateway.status_page import StatusBoard
from gateway.tls import ServerTls, configured_tls, watch_certificates

log = structlog.get_logger("streamgate.app")


@dataclass(slots=True)
class Running:
    """What ``serve_gateway`` reports once everything is bound."""

    listeners: list[ListenerInfo] = field(default_factory=list)
    admin: tuple[str, int] | None = None
    admin_tls: tuple[str, int] | None = None  # the admin port served over TLS (maybe ``admin``)
    metrics: Metrics | None = None
    backend: Backend | None = None
    drain: Drain | None = None
    health: Health | None = None

    def address(self, protocol: str, *, tls: bool | None = None) -> tuple[str, int]:
        """Where ``protocol`` is served: plaintext (``tls=False``), TLS (``True``), or either,
        plaintext first (``None``)."""
        found = [i for i in self.listeners if i.protocol == protocol and tls in (None, i.tls)]
        found.sort(key=lambda i: i.tls)
        if not found:
            raise KeyError(protocol)
        return found[0].addresses[0]

    def shutdown(self) -> None:
        """Begin the graceful shutdown: not ready, stop accepting, drain, then return."""
        assert self.drain is not None and self.health is not None
        self.health.draining = True
        self.drain.start()


def _optional(value: int) -> int | None:
    return None if value < 0 else value


def users_path(config: Config) -> str | None:
    """Where the user store persists (see AuthConfig.users_file)."""
    where = config.auth.users_file
    if where == "none":
        return None
    if where:
        return where
    url = config.backend.url
    if url.partition(":")[0].lower() == "embedded":
        return str(embedded_path(url) / "users.json")
    return None


def _groups(config: Config, backend: Backend) -> Groups | None:
    """Who runs consumer groups: the broker (None: the router forwards them to the backend),
    every gateway on the backend together over its shared log, or this process alone."""
    if backend.capabilities.native_groups:
        return None
    g = config.groups
    settings = {
        "initial_rebalance_delay_ms": g.initial_rebalance_delay_ms,
        "min_session_timeout_ms": g.min_session_timeout_ms,
        "max_session_timeout_ms": g.max_session_timeout_ms,
    }
    if isinstance(backend, SharedLogs):
        shared = SharedGroups(**settings)
        shared.bind(backend.shared_log(shared))  # before the backend runs: it follows the log
        return shared
    return GroupCoordinator(**settings)


IGGY_GROUPS_TOPIC = Topic("__streamgate", "iggy-groups")
IGGY_GROUPS_KAFKA_TOPIC = Topic(DEFAULT_STREAM, "__streamgate_iggy_groups")  # no streams there


def _iggy_groups(backend: Backend, router: Router) -> IggyGroups:
    """Where the Iggy listener keeps its consumer groups: this process on the embedded log, the
    backend (a log of definitions, broker groups for membership) where every gateway sees it."""
    if not router.groups_shared:
        return LocalGroups()
    definitions = GroupDefinitions()
    shared = SharedIggyGroups(router, definitions)
    # Kept for ever (Kafka: retention.ms -1, others: no limit): a handful of small records, and
    # a group lives on.
    if backend.capabilities.streams:
        log_of = TopicLog(backend, definitions, IGGY_GROUPS_TOPIC, retention_ms=None)
    else:
        log_of = TopicLog(backend, definitions, IGGY_GROUPS_KAFKA_TOPIC, retention_ms=-1)
    shared.bind(log_of)
    return shared


def _access_log(config: Config, metrics: Metrics) -> AccessLog | None:
    a = config.access_log
    if not a.path:
        return None
    return AccessLog(a.path, max_bytes=a.max_bytes, backups=a.backups, metrics=metrics)


def _count_retries(backend: Backend, metrics: Metrics) -> None:
    """The backend adapter's retries into ``streamgate_backend_retries_total``."""
    retries = getattr(backend, "retries", None)
    if isinstance(retries, Retries):
        name = backend.name

        def count(reason: str) -> None:
            metrics.backend_retries.labels(name, reason).inc()

        retries.listen(count)


def _lag_sampler(config: Config, metrics: Metrics) -> LagSampler | None:
    m = config.metrics
    if not m.lag_groups:
        return None
    return LagSampler(
        metrics, groups=m.lag_groups, topics=m.lag_topics, interval_s=m.lag_interval_s
    )


def server_tls(config: Config) -> dict[str, ServerTls]:
    """The TLS of every enabled listener (by protocol) and of the admin port ("admin")."""
    found: dict[str, ServerTls] = {}
    for name in ("rog", "kafka", "iggy", "rabbitmq_stream"):
        listener = getattr(config.listeners, name)
        if listener.enabled and (tls := configured_tls(listener.tls, name)) is not None:
            found[name] = tls
    if config.admin.enabled and (tls := configured_tls(config.admin.tls, "admin")) is not None:
        found["admin"] = tls
    return found


def _ports(
    port: int, config: TlsConfig, tls: ServerTls | None
) -> list[tuple[int, ServerTls | None, int | None]]:
    """(port, its TLS, the advertised port it overrides) of one listener: TLS only on its port,
    or plaintext there and TLS on ``tls.port`` beside it."""
    if tls is None:
        return [(port, None, None)]
    if config.port < 0:
        return [(port, tls, None)]
    return [(port, None, None), (config.port, tls, config.advertised_port)]


def build_backend(config: Config) -> Backend:
    b = config.backend
    settings = BackendSettings(
        fsync=b.fsync,
        segment_bytes=b.segment_bytes,
        retention_ms=_optional(b.retention_ms),
        retention_bytes=_optional(b.retention_bytes),
        max_message_bytes=b.max_message_bytes,
        max_open_files=b.max_open_files,
    )
    return create_backend(b.url, settings)


async def serve_gateway(
    config: Config,
    *,
    registry: CollectorRegistry | None = None,
    backend: Backend | None = None,
    task_status: trio.TaskStatus[Running] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run the whole gateway until cancelled or until ``Running.shutdown()`` has drained it."""
    backend = backend if backend is not None else build_backend(config)
    metrics = Metrics(registry, backend=backend.name, topic_patterns=config.metrics.topic_patterns)
    _count_retries(backend, metrics)
    if isinstance(backend, EmbeddedBackend):  # disk full, I/O errors, corruption found
        backend.storage.listen(metrics.storage_event)
    lag = _lag_sampler(config, metrics)
    limits = Limits(
        max_frame_bytes=config.limits.max_frame_bytes,
        max_connections=config.limits.max_connections,
        idle_timeout_s=config.limits.idle_timeout_s,
        drain_timeout_s=config.limits.drain_timeout_s,
        max_preauth_frame_bytes=config.limits.max_preauth_frame_bytes,
        auth_timeout_s=config.limits.auth_timeout_s,
        request_timeout_s=config.limits.request_timeout_s,
        max_buffered_bytes=config.limits.max_buffered_bytes,
    )
    tls = server_tls(config)  # before anything starts: unreadable certificates stop it here
    coordinator = _groups(config, backend)
    access_log = _access_log(config, metrics)
    health = Health(ping=backend.ping, fds=FD_GUARD.check)
    drain = Drain()
    running = Running(metrics=metrics, backend=backend, drain=drain, health=health)
    async with trio.open_nursery() as outer:
        # The backend first: the embedded store locks its directory before anything reads or
        # writes there (users.json included), so a gateway that finds it in use writes nothing.
        await outer.start(backend.run)
        if access_log is not None:
            # Cancelled last, with the backend, once every listener has drained: it writes what
            # the drained requests left in its queue before it closes the file.
            await outer.start(access_log.run)
        if coordinator is not None:
            await outer.start(coordinator.run)
        users = UserStore(
            config.auth.user_map(),
            root_username=config.auth.root_username,
            root_password=config.auth.root_password,
            path=users_path(config),
            guard=LoginGuard(_login_limits(config)),
            login_cache_s=config.auth.login_cache_s,
        )
        required = requiring_authentication(config)
        log.info(anonymous_line(config.auth.anonymous, required, users.find_user(ANONYMOUS)))
        authorizer = Authorizer(
            users,
            backend.list_streams,
            anonymous=anonymous_permissions(
                config.auth.anonymous, authentication_required=bool(required)
            ),
        )
        router = Router(
            backend,
            metrics,
            coordinator=coordinator,
            users=users,
            access_log=access_log,
            on_commit=None if lag is None else lag.committed,
            authorizer=authorizer,
            max_partitions_per_topic=config.limits.max_partitions_per_topic,
        )
        await outer.start(functools.partial(sample_runtime, metrics))
        if tls:
            await outer.start(functools.partial(watch_certificates, list(tls.values())))
        await outer.start(watch_backend, health.backend_error, metrics)
        if lag is not None:
            await outer.start(lag.run, router)
        iggy_groups = _iggy_groups(backend, router)
        if isinstance(iggy_groups, SharedIggyGroups) and config.listeners.iggy.enabled:
            await outer.start(iggy_groups.run)
        services = _services(config, router, users, limits, iggy_groups)
        async with trio.open_nursery() as nursery:
            for protocol, handler, port, host in services:
                tls_config = getattr(config.listeners, protocol).tls
                for bind, port_tls, advertised in _ports(port, tls_config, tls.get(protocol)):
                    with naming_address(protocol, host, bind):
                        info = await nursery.start(
                            _serve, protocol, handler, host, bind, metrics, limits, drain,
                            config.reuse_port, access_log, port_tls, advertised,
                            _authenticates(config, protocol),
                        )  # fmt: skip
                    running.listeners.append(info)
            await _record_listeners(backend, config, running.listeners)
            if config.admin.enabled:
                host = config.admin.host or config.host
                status = StatusBoard(
                    metrics.registry,
                    backend=backend.name,
                    backend_url=config.backend.url,
                    listeners=[(i.protocol, *a) for i in running.listeners for a in i.addresses],
                    scope=_scope(config),
                )
                admin_tls = tls.get("admin")
                side = admin_tls is not None and config.admin.tls.port >= 0
                with naming_address("admin", host, config.admin.port):
                    running.admin = await outer.start(
                        _admin, host, config.admin.port, metrics, health, status,
                        None if side else admin_tls,
                    )  # fmt: skip
                if side:
                    with naming_address("admin (tls)", host, config.admin.tls.port):
                        running.admin_tls = await outer.start(
                            _admin, host, config.admin.tls.port, metrics, health, status,
                            admin_tls, False,
                        )  # fmt: skip
                elif admin_tls is not None:
                    running.admin_tls = running.admin
            health.listeners_bound = True
            log.info(
                "streamgate ready",
                backend=backend.name,
                listeners={i.protocol + ("+tls" if i.tls else ""):
                           f"{i.addresses[0][0]}:{i.addresses[0][1]}"
                           for i in running.listeners},
                admin=None if running.admin is None else f"{running.admin[0]}:{running.admin[1]}",
            )  # fmt: skip
            runtime_gc.settle()
            task_status.started(running)
        # Every listener has drained (or was cancelled): stop the admin server and the backend.
        outer.cancel_scope.cancel()


def _services(
    config: Config, router: Router, users: UserStore, limits: Limits, iggy_groups: IggyGroups
) -> list[tuple[str, Handler, int, str]]:
    """(protocol, handler, port, host) of every enabled listener."""
    services: list[tuple[str, Handler, int, str]] = []
    rog = config.listeners.rog
    if rog.enabled:
        service = RogService(router, max_frame_bytes=limits.max_frame_bytes)
        services.append(("rog", service.handler(), rog.port, config.listener_host(rog)))
    kafka = config.listeners.kafka
    if kafka.enabled:
        settings = KafkaSettings(
            stream=kafka.stream,
            advertised_host=kafka.advertised_host or config.advertised_host,
            advertised_port=kafka.advertised_port,
            sasl=kafka.sasl,
            auto_create_topics=kafka.auto_create_topics,
            default_partitions=kafka.default_partitions,
            node_id=kafka.node_id,
            max_frame_bytes=limits.max_frame_bytes,
        )
        handler = KafkaService(router, settings, users=users).handler()
        services.append(("kafka", handler, kafka.port, config.listener_host(kafka)))
    iggy = config.listeners.iggy
    if iggy.enabled:
        iggy_settings = IggySettings(
            advertised_host=iggy.advertised_host or config.advertised_host,
            advertised_port=iggy.advertised_port,
            max_frame_bytes=limits.max_frame_bytes,
            # One of --workers with groups in its own memory: refused, not split.
            consumer_groups=isinstance(iggy_groups, SharedIggyGroups) or not config.reuse_port,
            first_client_id=(
                1 + secrets.randbelow(1 << 30) if isinstance(iggy_groups, SharedIggyGroups) else 1
            ),
        )
        iggy_service = IggyService(router, iggy_settings, users=users, groups=iggy_groups)
        services.append(("iggy", iggy_service.handler(), iggy.port, config.listener_host(iggy)))
    rabbit = config.listeners.rabbitmq_stream
    if rabbit.enabled:
        rabbit_service = RabbitStreamService(
            router,
            RabbitStreamSettings(
                advertised_host=rabbit.advertised_host or config.advertised_host,
                advertised_port=rabbit.advertised_port,
                frame_max=rabbit.frame_max,
                heartbeat_s=rabbit.heartbeat,
                max_frame_bytes=limits.max_frame_bytes,
                default_user=rabbit.default_user,
                default_password=rabbit.default_password,
                default_user_loopback_only=rabbit.default_user_loopback_only,
                # Not where other gateways share the store or the port: one process's memory.
                gateway_dedup=not config.reuse_port
                and not isinstance(router.backend, EmbeddedLink),
            ),
            users=users,
        )
        rabbit_service.ensure_default_user()
        services.append(("rabbitmq_stream", rabbit_service.handler(), rabbit.port,
                         config.listener_host(rabbit)))  # fmt: skip
    return services


async def _record_listeners(
    backend: Backend, config: Config, listeners: list[ListenerInfo]
) -> None:
    """Where a client command that finds the embedded directory in use can reach this gateway."""
    if not isinstance(backend, EmbeddedBackend | EmbeddedLink):  # the link: its owner's file
        return
    kafka = config.listeners.kafka
    await backend.record_listeners(
        Listener(
            info.protocol, *info.addresses[0],
            stream=kafka.stream if info.protocol == "kafka" else None,
            sasl=kafka.sasl and info.protocol == "kafka",
        )
        for info in listeners
        if not info.tls  # the client commands speak plaintext
    )  # fmt: skip


async def _serve(
    protocol: str,
    handler: Handler,
    host: str,
    port: int,
    metrics: Metrics,
    limits: Limits,
    drain: Drain,
    reuse_port: bool,
    access_log: AccessLog | None,
    tls: ServerTls | None = None,
    advertised_port: int | None = None,
    authenticates: bool = False,
    task_status: trio.TaskStatus[ListenerInfo] = trio.TASK_STATUS_IGNORED,
) -> None:
    await serve_protocol(
        protocol, handler, host=host, port=port, metrics=metrics, limits=limits, drain=drain,
        reuse_port=reuse_port, access_log=access_log, tls=tls, advertised_port=advertised_port,
        authenticates=authenticates, task_status=task_status,
    )  # fmt: skip


def _login_limits(config: Config) -> LoginLimits:
    a = config.auth
    return LoginLimits(
        hash_threads=a.hash_threads, max_pending_logins=a.max_pending_logins,
        login_failures=a.login_failures, login_failure_window_s=a.login_failure_window_s,
        login_backoff_s=a.login_backoff_s, login_max_backoff_s=a.login_max_backoff_s,
        peer_login_rate=a.peer_login_rate, peer_login_burst=a.peer_login_burst,
        max_tracked=a.login_tracked, user_backoff=a.user_login_backoff,
    )  # fmt: skip


def _authenticates(config: Config, protocol: str) -> bool:
    """Whether the listener's clients log in (held to the pre-login limits until they have):
    Rog never, Kafka with SASL only, Iggy (login) and RabbitMQ Stream (Open) always."""
    if protocol == "kafka":
        return config.listeners.kafka.sasl
    return protocol in ("iggy", "rabbitmq_stream")


def _scope(config: Config) -> str:
    """Whose numbers the status page shows."""
    if config.reuse_port:  # one of --workers (or of gateways sharing the ports by hand)
        return "this process only (its ports are shared: reuse_port)"
    return "this process"


async def _admin(
    host: str,
    port: int,
    metrics: Metrics,
    health: Health,
    status: StatusBoard,
    tls: ServerTls | None = None,
    sample_status: bool = True,
    task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED,
) -> None:
    await serve_admin(
        host=host, port=port, registry=metrics.registry,
        ready=functools.partial(health.ready, metrics), status=status, tls=tls,
        sample_status=sample_status, task_status=task_status,
    )  # fmt: skip


async def run_until_signalled(
    config: Config, on_ready: Callable[[Running], None] | None = None
) -> None:
    """``streamgate run``: serve until SIGINT/SIGTERM, then drain and exit cleanly."""
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            running: Running = await nursery.start(serve_gateway, config)
            if on_ready is not None:
                on_ready(running)
            async for signum in signals:
                log.info("shutting down", signal=signal.Signals(signum).name)
                running.shutdown()
                break
