"""Executes canonical commands on the backend, timing every one into Prometheus.

Listeners never call the backend directly: everything goes through ``Router.execute`` so that
every command is measured the same way and failures are always ``GatewayError``s.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import structlog
import trio

from gateway.backends import Backend
from gateway.coordination import GroupCoordinator, UserStore
from gateway.metrics import Metrics
from gateway.model import (
    COMMAND_NAMES,
    AppendResult,
    Command,
    CommitOffset,
    GatewayError,
    ReadResult,
    Unsupported,
)

R = TypeVar("R")
log = structlog.get_logger("streamgate.router")

# The commands the Backend protocol has a method for; group membership goes to the gateway's
# coordinator (for backends without native groups) and authentication to the user store.
_BACKEND_COMMANDS = frozenset(name for name in COMMAND_NAMES if hasattr(Backend, name))
_GROUP_COMMANDS = (
    "join_group", "sync_group", "heartbeat", "leave_group", "describe_group", "list_groups",
)  # fmt: skip


@dataclass(slots=True)
class RequestContext:
    """One wire request: the labels its commands are measured under, and the time they took
    (the listener subtracts it to get the gateway's own overhead)."""

    protocol: str
    wire_command: str
    command_s: float = 0.0


class Router:
    def __init__(
        self,
        backend: Backend,
        metrics: Metrics,
        *,
        coordinator: GroupCoordinator | None = None,
        users: UserStore | None = None,
    ) -> None:
        self.backend = backend
        self.metrics = metrics
        self.coordinator = coordinator
        self._handlers: dict[str, Callable[[Any], Awaitable[Any]]] = {
            name: getattr(backend, name) for name in _BACKEND_COMMANDS
        }
        if coordinator is not None:
            for name in _GROUP_COMMANDS:
                self._handlers[name] = getattr(coordinator, name)
            self._handlers["commit_offset"] = self._commit_offset
        if users is not None:
            self._handlers["authenticate"] = users.authenticate

    async def _commit_offset(self, cmd: CommitOffset) -> Any:
        # A commit from a group member must come from the current generation (Kafka's
        # OffsetCommit rule), checked where the group state lives.
        assert self.coordinator is not None
        self.coordinator.check_commit(cmd.group, cmd.topic.stream, cmd.generation, cmd.member_id)
        return await self.backend.commit_offset(cmd)

    async def execute(self, cmd: Command[R], ctx: RequestContext) -> R:
        name = cmd.name
        handler = self._handlers.get(name)
        m = self.metrics
        t0 = time.perf_counter()
        try:
            if handler is None:
                raise Unsupported(f"{name} is not supported by the {self.backend.name} backend")
            result: R = await handler(cmd)
        except GatewayError as exc:
            elapsed = time.perf_counter() - t0
            ctx.command_s += elapsed
            m.observe_command(ctx.protocol, name, ctx.wire_command, elapsed, exc.error_type)
            m.backend_request_duration.labels(m.backend, name, "error").observe(elapsed)
            raise
        except (trio.Cancelled, KeyboardInterrupt):
            raise
        except Exception as exc:
            # A bug or an unexpected OS error in a backend must fail the one command with a
            # protocol error, not the connection or the listener.
            elapsed = time.perf_counter() - t0
            ctx.command_s += elapsed
            log.exception("backend command failed", command=name, protocol=ctx.protocol)
            m.observe_command(ctx.protocol, name, ctx.wire_command, elapsed, "internal")
            m.backend_request_duration.labels(m.backend, name, "error").observe(elapsed)
            raise GatewayError(f"internal error in {name}: {exc.__class__.__name__}") from exc
        elapsed = time.perf_counter() - t0
        ctx.command_s += elapsed
        if isinstance(result, ReadResult):
            if result.waited_s:
                m.long_poll_wait.labels(ctx.protocol, m.backend).observe(result.waited_s)
                elapsed = max(0.0, elapsed - result.waited_s)
            m.messages_out.labels(ctx.protocol).inc(result.count)
        elif isinstance(result, AppendResult) and not result.duplicate:
            m.messages_in.labels(ctx.protocol).inc(result.count)
        m.observe_command(ctx.protocol, name, ctx.wire_command, elapsed)
        m.backend_request_duration.labels(m.backend, name, "ok").observe(elapsed)
        return result


__all__ = ["RequestContext", "Router"]
