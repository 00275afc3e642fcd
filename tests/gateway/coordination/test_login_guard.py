"""The login guard: failed-login backoff per peer and per username, the per-peer login rate, the
bounded tables, the hashing limiter and its queue; and the user store going through it."""

from __future__ import annotations

import threading

import pytest
import trio
import trio.testing

from gateway import config
from gateway.config import ConfigError
from gateway.coordination import credentials
from gateway.coordination.login_guard import (
    LoginBusy,
    LoginGuard,
    LoginLimits,
    LoginThrottled,
    peer_key,
)
from gateway.coordination.users import UserStore
from gateway.model import Authenticate, InvalidCredentials, InvalidToken, Timeout

ALICE = "10.0.0.1:40000"
BOB = "10.0.0.2:40000"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def guard(clock: Clock, **limits: float) -> LoginGuard:
    base = {"peer_login_rate": 0.0, "login_failures": 3, "login_backoff_s": 1.0}
    return LoginGuard(LoginLimits(**{**base, **limits}), clock=clock)  # type: ignore[arg-type]


def blocked_for(g: LoginGuard, peer: str, user: str) -> float | None:
    try:
        g.check(peer, user)
    except LoginThrottled as exc:
        return exc.retry_after_s
    return None


def test_peer_key_drops_the_port_and_groups_ipv6_by_64() -> None:
    assert peer_key("10.1.2.3:5555") == "10.1.2.3"
    assert peer_key("[2001:db8:1:2::7]:5555") == "2001:db8:1:2::/64"
    assert peer_key("2001:db8:1:2:aaaa::9:5555") == "2001:db8:1:2::/64"
    assert peer_key("[::ffff:10.0.0.9]:1") == "10.0.0.9"
    assert peer_key("?") == "?"


def test_backoff_after_n_failures_doubles_up_to_the_cap_and_success_resets() -> None:
    clock = Clock()
    g = guard(clock, login_max_backoff_s=5.0)
    for _ in range(2):
        g.failed(ALICE, "alice")
        assert blocked_for(g, ALICE, "alice") is None
    waits = []
    for _ in range(5):
        g.failed(ALICE, "alice")
        wait = blocked_for(g, ALICE, "alice")
        assert wait is not None
        waits.append(wait)
        clock.now += wait  # the backoff ends: one more try is allowed
        assert blocked_for(g, ALICE, "alice") is None
    assert waits == [1.0, 2.0, 4.0, 5.0, 5.0]
    g.failed(ALICE, "alice")
    g.succeeded(ALICE, "alice")
    assert blocked_for(g, ALICE, "alice") is None
    g.failed(ALICE, "alice")  # counting starts again from the first failure
    assert blocked_for(g, ALICE, "alice") is None


def test_by_default_a_user_failing_elsewhere_is_not_locked_out() -> None:
    """Without auth.user_login_backoff, failures for a user from other addresses do not stop
    its login from a good one (no one can lock a user out by failing on purpose)."""
    clock = Clock()
    g = guard(clock)
    for peer in ("10.9.0.1:1", "10.9.0.2:1", "10.9.0.3:1"):
        g.failed(peer, "carol")
    assert blocked_for(g, BOB, "carol") is None
    g.failed("10.9.0.1:1", "carol")
    assert blocked_for(g, "10.9.0.1:2", "carol") is None  # two failures there: not yet
    g.failed("10.9.0.1:1", "carol")
    assert blocked_for(g, "10.9.0.1:2", "carol") == 1.0  # three: that address is
    assert blocked_for(g, BOB, "carol") is None  # and only that address


def test_a_blocked_peer_is_refused_for_any_user_and_a_blocked_user_from_any_peer() -> None:
    clock = Clock()
    g = guard(clock, user_backoff=True)
    for user in ("u1", "u2", "u3"):  # one peer, a different user each time
        g.failed(ALICE, user)
    assert blocked_for(g, ALICE, "someone-else") == 1.0
    assert blocked_for(g, BOB, "someone-else") is None
    for peer in ("10.9.0.1:1", "10.9.0.2:1", "10.9.0.3:1"):  # one user from three peers
        g.failed(peer, "carol")
    assert blocked_for(g, BOB, "carol") == 1.0
    assert blocked_for(g, BOB, "dave") is None


def test_a_quiet_window_forgives_failures() -> None:
    clock = Clock()
    g = guard(clock, login_failure_window_s=10.0)
    g.failed(ALICE, "alice")
    g.failed(ALICE, "alice")
    clock.now += 10.5
    g.failed(ALICE, "alice")  # the third, but after a quiet window: the first again
    assert blocked_for(g, ALICE, "alice") is None


def test_failures_within_the_window_of_the_backoffs_end_keep_doubling() -> None:
    clock = Clock()
    g = guard(clock, login_failure_window_s=2.0, login_max_backoff_s=100.0)
    for _ in range(3):
        g.failed(ALICE, "")
    clock.now += 1.0 + 1.5  # the 1 s backoff, then less than a window
    g.failed(ALICE, "")
    assert blocked_for(g, ALICE, "") == 2.0


def test_no_backoff_when_login_failures_is_zero() -> None:
    clock = Clock()
    g = guard(clock, login_failures=0)
    for _ in range(100):
        g.failed(ALICE, "alice")
    assert blocked_for(g, ALICE, "alice") is None
    assert len(g.peers) == 0 and len(g.users) == 0


def test_peer_login_rate_is_a_token_bucket() -> None:
    clock = Clock()
    g = guard(clock, peer_login_rate=2.0, peer_login_burst=3)
    for _ in range(3):
        g.check(ALICE, "alice")
    wait = blocked_for(g, ALICE, "alice")
    assert wait == pytest.approx(0.5)
    assert blocked_for(g, BOB, "alice") is None  # another address has its own bucket
    clock.now += 0.5
    assert blocked_for(g, ALICE, "alice") is None
    assert blocked_for(g, ALICE, "alice") is not None
    clock.now += 100.0  # refilled up to the burst, no more
    for _ in range(3):
        g.check(ALICE, "alice")
    assert blocked_for(g, ALICE, "alice") is not None


def test_untracked_peer_and_username() -> None:
    clock = Clock()
    g = guard(clock, peer_login_rate=1.0, peer_login_burst=1)
    for _ in range(10):
        g.check("", "")
        g.failed("", "")
    assert len(g.peers) == 0 and len(g.users) == 0


def test_tables_are_lru_bounded() -> None:
    clock = Clock()
    g = guard(clock, max_tracked=100, user_backoff=True)
    for i in range(5000):
        g.failed(f"10.{i // 250}.{i % 250}.1:9", f"user-{i}")
    assert len(g.peers) == 100 and len(g.users) == 100
    for _ in range(3):  # the most recent entries are the ones kept
        g.failed("10.19.249.1:9", "user-4999")
    assert blocked_for(g, "10.19.249.1:1", "x") is not None
    assert blocked_for(g, BOB, "user-4999") is not None


async def test_hashing_runs_on_its_own_limiter_and_the_queue_is_bounded() -> None:
    g = LoginGuard(LoginLimits(hash_threads=1, max_pending_logins=1))
    release = threading.Event()
    started = threading.Event()

    def slow() -> str:
        started.set()
        assert release.wait(10)
        return "hashed"

    results: list[str] = []

    async def login() -> None:
        results.append(await g.hash(slow))

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(login)  # hashing
            nursery.start_soon(login)  # waiting
            assert await trio.to_thread.run_sync(started.wait, 10)
            await trio.testing.wait_all_tasks_blocked()
            assert g.limiter.statistics().tasks_waiting == 1
            # the default limiter (the store's fsyncs) lends none of its threads to hashing
            assert trio.to_thread.current_default_thread_limiter().borrowed_tokens == 0
            with pytest.raises(LoginBusy) as refused:
                await g.hash(slow)
            assert isinstance(refused.value, Timeout)  # transient: Iggy's SDK retries
            # setting a password waits for its turn instead of being refused
            nursery.start_soon(lambda: g.hash(lambda: "set", queue=False))
            await trio.sleep(0.05)
            release.set()
    assert results == ["hashed", "hashed"]


# -- the user store through the guard ----------------------------------------------------------


def _plain(user: str, password: str, peer: str = ALICE) -> Authenticate:
    return Authenticate(mechanism="PLAIN", username=user, secret=password.encode(), peer=peer)


async def test_store_refuses_without_hashing_after_the_failures_and_resets_on_success(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = Clock()
    store = UserStore({"alice": "alice-pw"}, guard=guard(clock, user_backoff=True))
    hashes = 0
    real = credentials.verify_password

    def counting(password: str, stored: str | None) -> bool:
        nonlocal hashes
        hashes += 1
        return real(password, stored)

    monkeypatch.setattr("gateway.coordination.users.verify_password", counting)
    for _ in range(3):
        with pytest.raises(InvalidCredentials) as failed:
            await store.authenticate(_plain("alice", "wrong"))
        assert not isinstance(failed.value, LoginThrottled)
    assert hashes == 3
    with pytest.raises(LoginThrottled) as refused:  # even the right password, unhashed
        await store.authenticate(_plain("alice", "alice-pw", BOB))
    assert isinstance(refused.value, InvalidCredentials)  # answered as a failed login
    assert "try again in 1 s" in refused.value.message
    assert hashes == 3
    clock.now += 1.0
    result = await store.authenticate(_plain("alice", "alice-pw", BOB))
    assert result.username == "alice" and hashes == 4
    assert store.guard.users.get("alice") is None  # the user's record went with the success


async def test_store_counts_wrong_tokens_against_the_peer() -> None:
    clock = Clock()
    store = UserStore(guard=guard(clock))
    for _ in range(3):
        with pytest.raises(InvalidToken):
            await store.authenticate(
                Authenticate(mechanism="TOKEN", secret=b"not-a-token", peer=ALICE)
            )
    with pytest.raises(LoginThrottled):
        await store.authenticate(_plain("iggy", "iggy"))
    assert (await store.authenticate(_plain("iggy", "iggy", BOB))).username == "iggy"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("auth.hash_threads", 0),
        ("auth.login_tracked", 0),
        ("auth.max_pending_logins", -1),
        ("auth.login_failures", -1),
        ("auth.peer_login_rate", -1.0),
        ("auth.login_backoff_s", 0.0),
        ("auth.login_max_backoff_s", 0.0),
        ("auth.login_failure_window_s", 0.0),
        ("auth.peer_login_burst", 0),
    ],
)
def test_config_refuses_login_limits_that_make_no_sense(key: str, value: float) -> None:
    with pytest.raises(ConfigError, match=key):
        config.load(overrides={key: value})


def test_config_defaults() -> None:
    auth = config.load().auth
    assert (auth.hash_threads, auth.max_pending_logins, auth.login_failures) == (2, 64, 5)
    assert config.load(overrides={"auth.peer_login_rate": 0, "auth.peer_login_burst": 0})
