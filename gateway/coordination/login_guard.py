"""What stands between a login flood and the password hash: a dedicated, bounded limiter for
scrypt, a bounded queue of logins waiting for it, failed-login backoff per peer address and per
username, and a login-rate limit per peer address.

A password login costs one scrypt (~30 ms, 16 MiB). Run in trio's default worker threads, a flood
of wrong passwords took every one of them (RSS 64 -> 823 MB) and starved the embedded store's
fsyncs, which wait in the same threads (issue 18). Here hashing has its own
``trio.CapacityLimiter`` (``auth.hash_threads``); at most ``auth.max_pending_logins`` more logins
wait for it, and the next is refused at once as a transient failure (``LoginBusy``).

Before any hashing, ``check`` refuses (``LoginThrottled``, no hash) a login:
- from a peer address or for a username that failed ``login_failures`` times in a row, each
  failure within ``login_failure_window_s`` of the previous one (or of the end of the last
  backoff): the backoff is ``login_backoff_s`` doubled for every further failure, at most
  ``login_max_backoff_s``. A success resets both; a quiet window forgives.
- from a peer address over ``peer_login_rate`` logins a second (a token bucket holding
  ``peer_login_burst``), failed or not.

A peer is its IP address without the port (an IPv6 address by its /64, which one host usually
holds whole). The tables keep at most ``max_tracked`` peers and as many usernames, the least
recently seen dropped first, so memory stays bounded whatever names and addresses come.
Peer "" (a login with no connection, as tests make) and username "" (a token) are not tracked.
"""

from __future__ import annotations

import ipaddress
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import trio

from gateway.model import GatewayError, InvalidCredentials, Timeout

T = TypeVar("T")


class LoginRefused(GatewayError):
    """A login refused before its password was hashed (counted as ``login_throttled``)."""


class LoginThrottled(LoginRefused, InvalidCredentials):
    """Backoff or rate limit: answered as a failed login (Kafka SASL_AUTHENTICATION_FAILED with
    the wait in its message, Iggy InvalidCredentials, RabbitMQ AUTHENTICATION_FAILURE), so a
    client that retries on transient errors does not hammer."""

    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class LoginBusy(LoginRefused, Timeout):
    """Too many logins waiting for the hash threads: transient (Iggy TransientNotAccepted, which
    its SDK retries; Kafka SASL_AUTHENTICATION_FAILED saying to try later)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LoginLimits:
    hash_threads: int = 2
    max_pending_logins: int = 64
    login_failures: int = 5  # 0 = no backoff
    login_failure_window_s: float = 60.0
    login_backoff_s: float = 1.0
    login_max_backoff_s: float = 60.0
    peer_login_rate: float = 10.0  # logins a second per peer address; 0 = no limit
    peer_login_burst: int = 50
    max_tracked: int = 10_000  # peers, and as many usernames
    # Back off per username too, whichever address the logins come from: it stops a brute force
    # spread over many addresses, but lets anyone lock a user out by failing on purpose (and a
    # client retrying a stale password locks out its user's other clients). Off by default.
    user_backoff: bool = False


class _Record:
    __slots__ = ("blocked_until", "failures", "last_failure", "tokens", "tokens_at")

    def __init__(self, now: float, burst: float) -> None:
        self.failures = 0
        self.last_failure = now
        self.blocked_until = 0.0
        self.tokens = burst
        self.tokens_at = now


def peer_key(peer: str) -> str:
    """``host:port`` (``[v6]:port`` or ``v6:port``) -> the address a backoff applies to."""
    host = peer.rpartition(":")[0].strip("[]") if ":" in peer else peer
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


class _Table:
    """Records by key, least recently used first, at most ``size`` of them."""

    def __init__(self, size: int) -> None:
        self._size = max(1, size)
        self._records: OrderedDict[str, _Record] = OrderedDict()

    def get(self, key: str) -> _Record | None:
        record = self._records.get(key)
        if record is not None:
            self._records.move_to_end(key)
        return record

    def get_or_add(self, key: str, now: float, burst: float) -> _Record:
        record = self.get(key)
        if record is None:
            record = self._records[key] = _Record(now, burst)
            if len(self._records) > self._size:
                self._records.popitem(last=False)
        return record

    def pop(self, key: str) -> None:
        self._records.pop(key, None)

    def __len__(self) -> int:
        return len(self._records)


class LoginGuard:
    def __init__(
        self, limits: LoginLimits | None = None, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limits = limits = limits if limits is not None else LoginLimits()
        self._clock = clock
        self.limiter = trio.CapacityLimiter(max(1, limits.hash_threads))
        self._in_flight = 0  # logins hashing or waiting to
        self.peers = _Table(limits.max_tracked)
        self.users = _Table(limits.max_tracked)

    # -- before hashing -------------------------------------------------------------------------

    def check(self, peer: str, username: str) -> None:
        """Raise ``LoginThrottled`` if this login may not be tried now; else take its token."""
        now = self._clock()
        lim = self.limits
        peer_record = self.peers.get(peer_key(peer)) if peer else None
        for what, record in (("address", peer_record), ("user", self._user(username))):
            if record is not None and record.blocked_until > now:
                wait = record.blocked_until - now
                raise LoginThrottled(
                    f"too many failed logins from this {what}, try again in {wait:.0f} s", wait
                )
        if not peer or lim.peer_login_rate <= 0:
            return
        record = self.peers.get_or_add(peer_key(peer), now, lim.peer_login_burst)
        record.tokens = min(
            float(lim.peer_login_burst),
            record.tokens + (now - record.tokens_at) * lim.peer_login_rate,
        )
        record.tokens_at = now
        if record.tokens < 1.0:
            wait = (1.0 - record.tokens) / lim.peer_login_rate
            raise LoginThrottled(
                f"too many logins from this address, try again in {wait:.1f} s", wait
            )
        record.tokens -= 1.0

    async def hash(self, fn: Callable[[], T], *, queue: bool = True) -> T:
        """``fn`` (a password hash) in a worker thread of the guard's own limiter. A login
        (``queue``) is refused with ``LoginBusy`` when the threads and the queue are full; a
        password being set waits for its turn."""
        if queue and self._in_flight >= self.limiter.total_tokens + self.limits.max_pending_logins:
            await trio.lowlevel.checkpoint()
            raise LoginBusy("too many logins in progress, try again later")
        self._in_flight += 1
        try:
            return await trio.to_thread.run_sync(fn, limiter=self.limiter)
        finally:
            self._in_flight -= 1

    # -- after ----------------------------------------------------------------------------------

    def failed(self, peer: str, username: str) -> None:
        now = self._clock()
        if peer:
            self._fail(self.peers, peer_key(peer), now)
        if username and self.limits.user_backoff:
            self._fail(self.users, username, now)

    def succeeded(self, peer: str, username: str) -> None:
        if peer:
            record = self.peers.get(peer_key(peer))
            if record is not None:  # its rate bucket stays
                record.failures = 0
                record.blocked_until = 0.0
        if username:
            self.users.pop(username)

    def _user(self, username: str) -> _Record | None:
        return self.users.get(username) if username and self.limits.user_backoff else None

    def _fail(self, table: _Table, key: str, now: float) -> None:
        lim = self.limits
        if lim.login_failures <= 0:
            return
        record = table.get_or_add(key, now, lim.peer_login_burst)
        if now - max(record.last_failure, record.blocked_until) > lim.login_failure_window_s:
            record.failures = 0  # a quiet window: forgiven
        record.failures += 1
        record.last_failure = now
        beyond = record.failures - lim.login_failures
        if beyond >= 0:
            # 2**beyond, computed without overflow once it passes the cap
            backoff = lim.login_backoff_s * (2.0 ** min(beyond, 62))
            record.blocked_until = now + min(backoff, lim.login_max_backoff_s)


__all__ = [
    "LoginBusy",
    "LoginGuard",
    "LoginLimits",
    "LoginRefused",
    "LoginThrottled",
    "peer_key",
]
