"""One member of a broker group run through the router's JoinGroup, SyncGroup, Heartbeat and
LeaveGroup on a client's behalf: what RabbitMQ Stream single active consumers
(``rabbitmq_stream.sac``) and Iggy consumer groups (``iggy.groups_shared``) share where the
broker (or the gateways' replicated groups) decides for every gateway."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Final

import structlog
import trio

from gateway.model import (
    DEFAULT_STREAM,
    GatewayError,
    Heartbeat,
    IllegalGeneration,
    LeaveGroup,
    RebalanceInProgress,
    UnknownMember,
)
from gateway.router import RequestContext, Router

log = structlog.get_logger("streamgate.groups")

RETRY_S: Final = 1.0
LEAVE_WITHIN_S: Final = 2.0


class Membership:
    """The broker's id of one member, kept across its rounds (rejoins name it)."""

    __slots__ = ("member_id",)

    def __init__(self) -> None:
        self.member_id = ""


async def keep_joining(
    router: Router,
    ctx: RequestContext,
    group: str,
    membership: Membership,
    one_round: Callable[[], Awaitable[None]],
    between: Callable[[], Awaitable[None]],
) -> None:
    """Run ``one_round`` (join, sync, heartbeat until the group rebalances) again and again until
    cancelled; ``between`` runs after every round, before the next join (a member gives up what
    it held there). On the way out the member leaves the group; failing that, the coordinator
    drops it after its session timeout."""
    try:
        while True:
            try:
                await one_round()
            except UnknownMember:
                membership.member_id = ""  # the coordinator forgot it (session timeout): anew
            except (RebalanceInProgress, IllegalGeneration):
                pass  # a rebalance began: rejoin at once
            except GatewayError as exc:
                log.info("broker group member", group=group, error=exc.message)
                await between()
                await trio.sleep(RETRY_S)
            await between()
    finally:
        if membership.member_id:
            leave = LeaveGroup(group=group, stream=DEFAULT_STREAM,
                               member_ids=(membership.member_id,))  # fmt: skip
            with (
                trio.CancelScope(shield=True),
                trio.move_on_after(LEAVE_WITHIN_S),
                contextlib.suppress(GatewayError),
            ):
                await router.execute(leave, ctx)


async def heartbeat(
    router: Router,
    ctx: RequestContext,
    group: str,
    generation: int,
    member_id: str,
    every_s: float,
    until: Callable[[], bool] = lambda: False,
) -> None:
    """Heartbeat every ``every_s`` until the group answers a rebalance (the error raised) or
    ``until()`` holds."""
    while not until():
        await trio.sleep(every_s)
        await router.execute(
            Heartbeat(group=group, stream=DEFAULT_STREAM, generation=generation,
                      member_id=member_id),
            ctx,
        )  # fmt: skip


__all__ = ["Membership", "heartbeat", "keep_joining"]
