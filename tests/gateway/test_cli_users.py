"""``streamgate users`` end to end, as real processes: on a data directory's users.json (before
and while a gateway runs on it) and through a running gateway's Iggy listener; every user made
logs in through Kafka SCRAM (confluent-kafka) and through Iggy (apache-iggy); grants, revokes,
password changes, deletions and tokens are seen by the running gateway. Passwords reach the
commands through files, stdin or the environment: never through argv."""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import trio
from apache_iggy import IggyClient, TcpConfig
from confluent_kafka import KafkaError, KafkaException, Producer

from tests.helpers.gateways import Gateway, running_gateway

LIMIT_S = 30.0
SECRETS: list[str] = []  # every password of this module: none may be in any argv


def secret(value: str) -> str:
    SECRETS.append(value)
    return value


CAROL, DAVE, DAVE2, ERIN, ERIN2 = (
    secret("carol-pw-123"), secret("dave-pw-456"), secret("dave-new-789"),
    secret("erin-pw-abc"), secret("erin-new-def"),
)  # fmt: skip
ROOT = secret("root-pw-xyz")


@dataclass(frozen=True)
class Ran:
    code: int
    out: str
    err: str


async def users(
    *args: str, cwd: Path, stdin: bytes = b"", env: dict[str, str] | None = None
) -> Ran:
    argv = [sys.executable, "-m", "gateway.cli", "users", *args]
    assert not [s for s in SECRETS if any(s in a for a in argv)], "a password in argv"
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMGATE_")}
    with trio.fail_after(LIMIT_S):
        done = await trio.run_process(
            argv, stdin=stdin, capture_stdout=True, capture_stderr=True, check=False,
            cwd=cwd, env={**full_env, **(env or {})},
        )  # fmt: skip
    ran = Ran(done.returncode, done.stdout.decode(), done.stderr.decode())
    assert not [s for s in SECRETS if s in ran.err], "a password in an error message"
    return ran


async def ok(*args: str, cwd: Path, stdin: bytes = b"", env: dict[str, str] | None = None) -> str:
    ran = await users(*args, cwd=cwd, stdin=stdin, env=env)
    assert ran.code == 0, f"users {' '.join(args)}: exit {ran.code}\n{ran.err}"
    return ran.out


def password_file(directory: Path, name: str, password: str) -> str:
    path = directory / f"{name}.pw"
    path.write_text(password + "\n")
    return str(path)


async def kafka_login(gateway: Gateway, mechanism: str, user: str, password: str) -> bool:
    """Whether ``user`` logs in through the Kafka listener with ``mechanism``."""
    errors: list[KafkaError] = []

    def work() -> bool:
        p = Producer({"bootstrap.servers": gateway.kafka, "security.protocol": "SASL_PLAINTEXT",
                      "sasl.mechanisms": mechanism, "sasl.username": user,
                      "sasl.password": password, "error_cb": errors.append})  # fmt: skip
        try:
            p.list_topics(timeout=5)
            return True
        except KafkaException:
            p.poll(0.5)
            assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
            return False

    with trio.fail_after(LIMIT_S):
        return await trio.to_thread.run_sync(work, abandon_on_cancel=True)


async def iggy_login(gateway: Gateway, user: str, password: str) -> bool:
    """Whether ``user`` logs in through the Iggy listener (apache-iggy)."""

    async def main() -> bool:
        client = IggyClient(TcpConfig(server_address=gateway.addresses["iggy"]))
        await client.connect()
        try:
            await client.login_user(user, password)
        except RuntimeError:
            return False
        await client.ping()  # (what else it may do is the authorization's business)
        return True

    with trio.fail_after(LIMIT_S):
        return await trio.to_thread.run_sync(
            lambda: asyncio.run(asyncio.wait_for(main(), LIMIT_S - 5)), abandon_on_cancel=True
        )


async def iggy_token_login(gateway: Gateway, token: str) -> bool:
    async def main() -> bool:
        address = gateway.addresses["iggy"]
        client = IggyClient.from_connection_string(f"iggy+tcp://{token}@{address}")
        try:
            await client.connect()
        except RuntimeError:
            return False
        await client.get_streams()
        await client.ping()
        return True

    with trio.fail_after(LIMIT_S):
        return await trio.to_thread.run_sync(
            lambda: asyncio.run(asyncio.wait_for(main(), LIMIT_S - 5)), abandon_on_cancel=True
        )


def line_of(out: str, name: str) -> str:
    found = [line for line in out.splitlines() if line.split("\t")[1:2] == [name]]
    assert len(found) == 1, out
    return found[0]


async def test_users_on_a_data_directory(tmp_path: Path) -> None:
    carol = password_file(tmp_path, "carol", CAROL)
    # Before any gateway ran: the store is made as the gateway would make it.
    out = await ok("create", "carol", "--password-file", carol, "--grant", "all", cwd=tmp_path)
    assert line_of(out, "carol").split("\t")[2] == "active"
    assert (tmp_path / "data" / "users.json").exists()
    assert CAROL not in (tmp_path / "data" / "users.json").read_text()
    # Refused logins are retried by librdkafka ~20 times a second: no failure backoff and no
    # per-address rate limit here, or the next user's login from 127.0.0.1 could meet them.
    sasl = ("--set", "listeners.kafka.sasl=true", "--set", "auth.login_failures=0",
            "--set", "auth.peer_login_rate=0")  # fmt: skip
    async with running_gateway("embedded:./data", tmp_path, "users", *sasl) as gw:
        assert await kafka_login(gw, "SCRAM-SHA-512", "carol", CAROL)
        assert await kafka_login(gw, "SCRAM-SHA-256", "carol", CAROL)
        assert await iggy_login(gw, "carol", CAROL)
        assert not await kafka_login(gw, "SCRAM-SHA-256", "carol", "not-carols")

        # While it runs: a new user from stdin, seen on its next lookup.
        await ok("create", "dave", "--password-stdin", cwd=tmp_path, stdin=DAVE.encode() + b"\n")
        assert await kafka_login(gw, "SCRAM-SHA-256", "dave", DAVE)
        assert await iggy_login(gw, "dave", DAVE)

        out = await ok("grant", "dave", "send_messages", "poll_messages", "--stream", "1",
                       cwd=tmp_path)  # fmt: skip
        assert line_of(out, "dave").endswith("stream:1=poll_messages,send_messages")
        out = await ok("grant", "dave", "read_topic", "--stream", "1", "--topic", "2",
                       cwd=tmp_path)  # fmt: skip
        assert "stream:1/topic:2=read_topic" in line_of(out, "dave")
        # The running gateway sees it: through its Iggy listener, as the root.
        url = f"iggy://iggy@{gw.addresses['iggy']}"
        root_env = {"STREAMGATE_LOGIN_PASSWORD": "iggy"}
        seen = await ok("list", "--url", url, cwd=tmp_path, env=root_env)
        assert "stream:1=poll_messages,send_messages" in line_of(seen, "dave")
        assert "stream:1/topic:2=read_topic" in line_of(seen, "dave")
        await ok("revoke", "dave", "all", "--stream", "1", cwd=tmp_path)
        seen = await ok("list", "--url", url, cwd=tmp_path, env=root_env)
        assert line_of(seen, "dave").endswith("\tstream:1/topic:2=read_topic")
        await ok("revoke", "dave", "read_topics", "--stream", "1", "--topic", "2", cwd=tmp_path)
        seen = await ok("list", "--url", url, cwd=tmp_path, env=root_env)
        assert line_of(seen, "dave").endswith("\t-")

        await ok("passwd", "dave", "--password-stdin", cwd=tmp_path, stdin=DAVE2.encode() + b"\n")
        assert not await kafka_login(gw, "SCRAM-SHA-512", "dave", DAVE)
        assert await kafka_login(gw, "SCRAM-SHA-512", "dave", DAVE2)
        assert await iggy_login(gw, "dave", DAVE2)

        token = (await ok("tokens", "create", "cli-token", "--user", "carol", cwd=tmp_path)).strip()
        assert len(token) >= 32
        assert await iggy_token_login(gw, token)
        listed = await ok("tokens", "list", "--user", "carol", cwd=tmp_path)
        assert listed.splitlines() == ["cli-token\tnever"]
        await ok("tokens", "delete", "cli-token", "--user", "carol", cwd=tmp_path)
        assert await ok("tokens", "list", "--user", "carol", cwd=tmp_path) == ""
        assert not await iggy_token_login(gw, token)

        await ok("delete", "dave", cwd=tmp_path)
        assert not await kafka_login(gw, "SCRAM-SHA-256", "dave", DAVE2)
        out = await ok("list", cwd=tmp_path)
        names = [line.split("\t")[1] for line in out.splitlines()]
        assert names == ["iggy", "carol", "guest"]  # guest: the RabbitMQ listener's default

    # Refusals are one line on stderr and exit 1.
    bad = await users("grant", "carol", "fly", cwd=tmp_path)
    assert bad.code == 1 and "not a global permission" in bad.err
    bad = await users("create", "frank", cwd=tmp_path)  # no terminal, no password source
    assert bad.code == 1 and "--password-stdin" in bad.err
    bad = await users("delete", "nobody", cwd=tmp_path)
    assert bad.code == 1 and "nobody" in bad.err


async def test_users_through_a_running_gateways_iggy_listener(tmp_path: Path) -> None:
    root_file = password_file(tmp_path, "root", ROOT)
    erin = password_file(tmp_path, "erin", ERIN)
    erin_new = password_file(tmp_path, "erin-new", ERIN2)
    # librdkafka retries a refused login many times a second (~100 in its 5 s), which earns its
    # address a failed-login backoff and then the per-address login rate limit (50 at once,
    # 10 a second); the right password is tried at once after it here (both have tests of their
    # own: test_login_guard.py, test_login_flood.py).
    argv = (
        "--set", "listeners.kafka.sasl=true", "--set", f"auth.root_password_file={root_file}",
        "--set", "auth.login_failures=0", "--set", "auth.peer_login_rate=0",
    )  # fmt: skip
    async with running_gateway("embedded:./data", tmp_path, "remote", *argv) as gw:
        url = f"iggy://iggy@{gw.addresses['iggy']}"
        env = {"STREAMGATE_LOGIN_PASSWORD": ROOT}
        login = ("--url", url)
        out = await ok("create", "erin", "--password-file", erin, *login, cwd=tmp_path, env=env)
        assert line_of(out, "erin").endswith("\t-")
        # Made through Iggy, the store derived her SCRAM keys too.
        assert await kafka_login(gw, "SCRAM-SHA-256", "erin", ERIN)
        assert await kafka_login(gw, "SCRAM-SHA-512", "erin", ERIN)

        out = await ok("grant", "erin", "read_streams", "--stream", "1", *login,
                       cwd=tmp_path, env=env)  # fmt: skip
        assert line_of(out, "erin").endswith("stream:1=read_stream")
        local = await ok("list", cwd=tmp_path)  # the same store, read from its file
        assert line_of(local, "erin").endswith("stream:1=read_stream")
        out = await ok("revoke", "erin", "read_stream", "--stream", "1", *login,
                       cwd=tmp_path, env=env)  # fmt: skip
        assert line_of(out, "erin").endswith("\t-")

        # Iggy's ChangePassword asks for the current password (a file here).
        await ok("passwd", "erin", "--password-file", erin_new, "--current-password-file", erin,
                 *login, cwd=tmp_path, env=env)  # fmt: skip
        assert await kafka_login(gw, "SCRAM-SHA-512", "erin", ERIN2)
        assert not await kafka_login(gw, "SCRAM-SHA-512", "erin", ERIN)
        assert await iggy_login(gw, "erin", ERIN2)

        # Tokens through Iggy are the logged-in user's.
        token = await ok("tokens", "create", "remote-token", *login, cwd=tmp_path, env=env)
        assert await iggy_token_login(gw, token.strip())
        listed = await ok("tokens", "list", *login, cwd=tmp_path, env=env)
        assert listed.splitlines() == ["remote-token\tnever"]
        await ok("tokens", "delete", "remote-token", *login, cwd=tmp_path, env=env)
        assert not await iggy_token_login(gw, token.strip())

        await ok("delete", "erin", *login, cwd=tmp_path, env=env)
        assert not await iggy_login(gw, "erin", ERIN2)

        wrong = await users("list", *login, cwd=tmp_path, env={"STREAMGATE_LOGIN_PASSWORD": "no"})
        assert wrong.code == 1 and wrong.err.startswith("streamgate: ")
        # the login password read from a file works as well as the environment
        out = await ok("list", *login, "--login-password-file", root_file, cwd=tmp_path)
        assert line_of(out, "iggy").startswith("0\tiggy\tactive\tglobal=")


@pytest.mark.parametrize("verb", ["create", "passwd"])
async def test_no_password_option_exists(tmp_path: Path, verb: str) -> None:
    ran = await users(verb, "someone", "--password", "x", cwd=tmp_path)
    assert ran.code == 2 and "--password" in ran.err  # ambiguous or unknown: refused
