"""No secret ever reaches a log line, an error text, /metrics, the status page or a URL shown to a
user (issue 17).

A real ``streamgate run`` (debug logging, access log on, TLS on the Kafka listener with client
certificates optional, Kafka SASL required) whose whole configuration, its backend URL with the
upstream's password included, sits in a TOML file: its root password comes from
``auth.root_password_file``, its users from ``auth.users_password_file``, the RabbitMQ Stream
listener's default password from its own file. Its backend is a second ``streamgate run`` serving
Iggy whose root password (also from a file) is not the default one, so the backend URL carries a
real secret. Every credential kind is then used by real clients, and each is checked to have
worked: Kafka SASL PLAIN and SCRAM-SHA-512 over TLS (confluent-kafka) with a produce/consume round
trip, a TLS client certificate and no password, a wrong password; Iggy with a password and with a
personal access token; RabbitMQ Stream PLAIN (rstream); ``streamgate users create
--password-file`` and ``users tokens create`` through the Iggy listener.

Afterwards every secret (each a distinctive random string), in its raw form and the forms a
protocol or a URL carries it in (percent-encoded, base64 at every alignment, hex), is looked for
in: both gateways' logs, the access log, GET /metrics (text and OpenMetrics), /status.json, /,
/readyz, the argv of every process started here (/proc/<pid>/cmdline while they ran), what the
``users`` commands wrote to stderr, and the error texts the clients got for wrong passwords.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gc
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.request
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, quote_plus

import pytest
import trio

from tests.helpers.certs import Certs, make_certs
from tests.helpers.gateways import Gateway, running_gateway
from tests.helpers.kafka_roundtrip import round_trip
from tests.helpers.processes import end_child

pytestmark = pytest.mark.slow

T = TypeVar("T")
LIMIT_S = 60.0
READY_WITHIN_S = 30.0
ENDPOINTS = ("rog", "kafka", "iggy", "rabbitmq_stream", "admin")


def _random(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(12)}"


@dataclass
class Secrets:
    """Every secret of one run, by what it is."""

    root: str = field(default_factory=lambda: _random("FrontRootPw"))
    alice: str = field(default_factory=lambda: _random("AlicePlainPw"))
    bob: str = field(default_factory=lambda: _random("BobScramPw"))
    carol: str = field(default_factory=lambda: _random("CarolRabbitPw"))
    guest: str = field(default_factory=lambda: _random("GuestRabbitPw"))
    dave: str = field(default_factory=lambda: _random("DaveCliPw"))
    wrong: str = field(default_factory=lambda: _random("WrongPw"))
    # In the backend URL: characters that a URL carries percent-encoded.
    upstream: str = field(default_factory=lambda: f"Up/str+eam:{secrets.token_hex(12)}@!")
    token: str = ""  # the personal access token, once made
    client_key: str = ""  # a line of the client certificate's private key
    server_key: str = ""  # a line of the server's private key

    def all(self) -> dict[str, str]:
        found = {name: value for name, value in vars(self).items() if value}
        assert len(found) == len(vars(self)), "a secret was not set"
        return found


def encoded_forms(secret: str) -> set[str]:
    """The secret as text may carry it: raw, percent-encoded, hex, and base64 in each of the
    three alignments it can have inside a longer base64 text (SASL PLAIN's token is
    ``base64("\\0user\\0password")``): the part of each encoding fixed by the secret alone."""
    raw = secret.encode()
    forms = {secret, quote(secret, safe=""), quote_plus(secret), raw.hex(), raw.hex().upper()}
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + raw).decode()
        core = encoded[4 if shift else 0 : -4]  # drop what the neighbours also decide
        assert len(core) >= 16
        forms.add(core)
        forms.add(core.replace("+", "-").replace("/", "_"))  # the URL-safe alphabet
    return forms


def pem_line(path: Path) -> str:
    """A 64-character base64 line from inside a PEM private key."""
    lines = [line for line in path.read_text().splitlines() if not line.startswith("-----")]
    assert len(lines) >= 3, path
    return lines[1]


def password_file(directory: Path, name: str, text: str) -> Path:
    path = directory / f"{name}.secret"
    path.write_text(text + "\n")
    path.chmod(0o600)
    return path


async def in_thread(fn: Callable[[], T], *, limit_s: float = LIMIT_S) -> T:
    with trio.fail_after(limit_s):
        return await trio.to_thread.run_sync(fn, abandon_on_cancel=True)


async def in_asyncio(main: Callable[[], Awaitable[T]], *, limit_s: float = LIMIT_S) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(main(), limit_s - 5)

    return await in_thread(lambda: asyncio.run(bounded()), limit_s=limit_s)


@dataclass
class Seen:
    """What the run produced that a person could read: name -> text."""

    texts: dict[str, str] = field(default_factory=dict)
    argvs: dict[str, list[str]] = field(default_factory=dict)  # process -> its argv
    from_proc: set[str] = field(default_factory=set)  # argvs read from /proc while it ran

    def argv_of(self, name: str, pid: int, argv: list[str]) -> None:
        """Record ``argv`` as given, and as /proc/<pid>/cmdline shows it if still running."""
        self.argvs[f"{name} (as started)"] = argv
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return
        if cmdline:
            self.argvs[f"{name} (/proc/{pid}/cmdline)"] = cmdline.decode(errors="replace").split(
                "\0"
            )
            self.from_proc.add(name)


# -- the front gateway, configured from a file -------------------------------------------------


@dataclass
class Front:
    process: trio.Process
    log_path: Path
    addresses: dict[str, str]

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def _listening(log: str) -> dict[str, str]:
    seen: dict[str, str] = {}
    for line in log.splitlines():
        words = line.split()
        if len(words) >= 4 and words[1:3] == ["listening", "on"] and words[0] in ENDPOINTS:
            seen[words[0]] = words[3].removeprefix("http://")
    return seen


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def write_config(path: Path, tables: dict[str, dict[str, object]]) -> None:
    lines = []
    for table, values in tables.items():
        lines.append(f"[{table}]")
        lines += [f"{key} = {_toml(value)}" for key, value in values.items()]
        lines.append("")
    path.write_text("\n".join(lines))
    path.chmod(0o600)


@asynccontextmanager
async def front_gateway(directory: Path, config: Path, seen: Seen) -> AsyncIterator[Front]:
    """``streamgate run --config config`` at debug level; nothing secret on its command line."""
    log_path = directory / "gateway-front.log"
    argv = [sys.executable, "-m", "gateway.cli", "run", "--config", str(config),
            "--log-format", "console", "--log-level", "debug"]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMGATE_")}
    with log_path.open("ab") as out:
        process = await trio.lowlevel.open_process(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            env={**env, "PYTHONUNBUFFERED": "1"}, cwd=directory,
        )  # fmt: skip
    front = Front(process, log_path, {})
    try:
        give_up = time.monotonic() + READY_WITHIN_S
        while set(front.addresses) != set(ENDPOINTS):
            if process.returncode is not None or time.monotonic() > give_up:
                raise AssertionError(
                    f"front gateway did not start (exit {process.returncode}):\n{front.log()}"
                )
            await trio.sleep(0.05)
            front.addresses = _listening(front.log())
        seen.argv_of("front gateway", process.pid, argv)
        yield front
    finally:
        with trio.CancelScope(shield=True):
            await end_child(process, grace_s=0, term_s=10)


# -- clients -----------------------------------------------------------------------------------


def kafka_tls(front: Front, certs: Certs) -> dict[str, Any]:
    return {"bootstrap.servers": front.addresses["kafka"], "ssl.ca.location": str(certs.ca_file)}


kafka_round_trip = round_trip


def kafka_refused(conf: dict[str, Any]) -> list[str]:
    """A login that must fail: the error texts the client got (and that it failed as an
    authentication error)."""
    from confluent_kafka import KafkaError, KafkaException, Producer

    errors: list[KafkaError] = []
    producer = Producer({**conf, "error_cb": errors.append, "reconnect.backoff.ms": 2000,
                         "reconnect.backoff.max.ms": 2000})  # fmt: skip
    texts = []
    try:
        producer.list_topics(timeout=3)
    except KafkaException as exc:
        texts.append(str(exc))
    else:
        raise AssertionError("a wrong password was accepted")
    producer.poll(1)
    producer.flush(0)
    del producer  # stops its retries
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    return texts + [f"{e.name()}: {e.str()}" for e in errors]


async def iggy_session(
    address: str, user: str, password: str, *, create: str | None = None, list_streams: bool = True
) -> list[str]:
    """Log in to the Iggy listener with a password (and make a stream): its streams' names
    (none asked for a user without the permission to read them)."""
    from apache_iggy import IggyClient, TcpConfig

    client = IggyClient(TcpConfig(server_address=address))
    await client.connect()
    await client.login_user(user, password)
    await client.ping()
    if create is not None:
        await client.create_stream(create)
    if not list_streams:
        return []
    return [s.name for s in await client.get_streams()]


async def iggy_refused(address: str, user: str, password: str) -> str:
    from apache_iggy import IggyClient, TcpConfig

    client = IggyClient(TcpConfig(server_address=address))
    await client.connect()
    try:
        await client.login_user(user, password)
    except RuntimeError as exc:
        return str(exc)
    raise AssertionError("a wrong Iggy password was accepted")


async def iggy_token_session(address: str, token: str) -> list[str]:
    from apache_iggy import IggyClient

    client = IggyClient.from_connection_string(f"iggy+tcp://{token}@{address}")
    await client.connect()
    await client.ping()
    return [s.name for s in await client.get_streams()]


async def rabbit_session(address: str, user: str, password: str, stream: str) -> None:
    from rstream import Producer

    host, port = address.rsplit(":", 1)
    async with Producer(host, int(port), username=user, password=password) as producer:
        await producer.create_stream(stream, exists_ok=True)
        await producer.send_wait(stream, b"through rabbitmq stream")


async def rabbit_refused(address: str, user: str, password: str) -> str:
    from rstream import Producer

    host, port = address.rsplit(":", 1)
    producer = Producer(host, int(port), username=user, password=password, max_retries=1)
    try:
        await asyncio.wait_for(producer.start(), 15)
    except Exception as exc:  # the text of whatever it raised is under test
        return f"{type(exc).__name__}: {exc}"
    finally:
        with contextlib.suppress(Exception):  # closing a refused client: its error is moot
            await asyncio.wait_for(producer.close(), 5)
    raise AssertionError("a wrong RabbitMQ Stream password was accepted")


def rabbit_refused_quietly(address: str, user: str, password: str) -> str:
    """``rabbit_refused`` in its own event loop. rstream 1.1.1's Client.close leaves the socket
    of a connection the server has closed (as the gateway does after a refused login) to the
    garbage collector, which would report it unclosed during some later test: it is collected
    here, with that one report (a ResourceWarning) silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        try:
            return asyncio.run(asyncio.wait_for(rabbit_refused(address, user, password), 30))
        finally:
            gc.collect()


@dataclass(frozen=True)
class Ran:
    code: int
    out: str
    err: str


async def users_command(seen: Seen, name: str, *args: str, cwd: Path, forbidden: list[str]) -> Ran:
    """``streamgate users ...`` as a process; its argv recorded (from /proc too, while it
    runs) and checked for secrets before it starts."""
    argv = [sys.executable, "-m", "gateway.cli", "users", *args]
    assert not [s for s in forbidden if any(s in a for a in argv)], "a secret in argv"
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMGATE_")}
    process = await trio.lowlevel.open_process(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=env, cwd=cwd,
    )  # fmt: skip
    seen.argv_of(name, process.pid, argv)
    out, err = bytearray(), bytearray()

    async def drain(stream: trio.abc.ReceiveStream, into: bytearray) -> None:
        async for chunk in stream:
            into += chunk

    try:
        with trio.fail_after(LIMIT_S):
            async with trio.open_nursery() as nursery:
                assert process.stdout is not None and process.stderr is not None
                nursery.start_soon(drain, process.stdout, out)
                nursery.start_soon(drain, process.stderr, err)
                await process.wait()
    finally:
        with trio.CancelScope(shield=True):
            await end_child(process, grace_s=0, term_s=5)
    assert process.returncode is not None
    ran = Ran(process.returncode, out.decode(errors="replace"), err.decode(errors="replace"))
    seen.texts[f"{name}: stderr"] = ran.err
    assert ran.code == 0, f"users {' '.join(args)}: exit {ran.code}\n{ran.err}"
    return ran


def http_get(url: str, accept: str | None = None) -> str:
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(request, timeout=10) as response:
        return str(response.read().decode())


async def admin_pages(front: Front) -> dict[str, str]:
    base = f"http://{front.addresses['admin']}"

    def fetch() -> dict[str, str]:
        return {
            "/metrics": http_get(f"{base}/metrics"),
            "/metrics (OpenMetrics)": http_get(
                f"{base}/metrics", "application/openmetrics-text; version=1.0.0"
            ),
            "/status.json": http_get(f"{base}/status.json"),
            "/": http_get(f"{base}/"),
            "/readyz": http_get(f"{base}/readyz"),
        }

    return await in_thread(fetch, limit_s=30)


# -- the test ----------------------------------------------------------------------------------


async def test_no_secret_reaches_anything_shown(tmp_path: Path) -> None:
    s = Secrets()
    seen = Seen()
    certs = make_certs(tmp_path / "certs")
    client_cert, client_key = certs.client("alice")
    s.client_key, s.server_key = pem_line(client_key), pem_line(certs.key_file)

    upstream_root = password_file(tmp_path, "upstream-root", s.upstream)
    front_root = password_file(tmp_path, "front-root", s.root)
    users_file = password_file(tmp_path, "users", f"alice:{s.alice}\nbob:{s.bob}\ncarol:{s.carol}")
    guest_file = password_file(tmp_path, "guest", s.guest)
    files = {"root": front_root, "dave": password_file(tmp_path, "dave", s.dave),
             "alice": password_file(tmp_path, "alice-login", s.alice),
             "client cert": client_cert, "client key": client_key}  # fmt: skip
    access_log = tmp_path / "access.jsonl"

    up_dir = tmp_path / "upstream"
    up_dir.mkdir()
    up_args = ("--set", f"auth.root_password_file={upstream_root}", "--log-level", "debug")
    async with running_gateway("embedded:./data", up_dir, "upstream", *up_args) as upstream:
        seen.argv_of("upstream gateway", upstream.pid, _argv_of(upstream))
        up_host, up_port = upstream.addresses["iggy"].rsplit(":", 1)
        backend_url = f"iggy://iggy:{quote(s.upstream, safe='')}@{up_host}:{up_port}"
        config = tmp_path / "front.toml"
        tls = {"enabled": True, "cert_file": certs.cert_file, "key_file": certs.key_file,
               "ca_file": certs.ca_file, "client_auth": "optional"}  # fmt: skip
        write_config(config, {
            "backend": {"url": backend_url},
            "listeners.rog": {"port": 0},
            "listeners.kafka": {"port": 0, "sasl": True},
            "listeners.kafka.tls": tls,
            "listeners.iggy": {"port": 0},
            "listeners.rabbitmq_stream": {"port": 0, "default_password_file": guest_file},
            "admin": {"port": 0},
            "auth": {"root_password_file": front_root, "users_password_file": users_file,
                     "users_file": tmp_path / "users.json"},
            "access_log": {"path": access_log},
        })  # fmt: skip

        async with front_gateway(tmp_path, config, seen) as front:
            pages = await use_every_credential(s, seen, front, certs, files)
            pages_text = "\n".join(pages.values())
            # The status page does show the backend, with its password masked.
            assert "iggy://iggy:***@" in pages["/status.json"], pages["/status.json"]
            seen.texts |= {f"GET {path}": text for path, text in pages.items()}
            assert 'protocol="kafka"' in pages_text  # the metrics saw the traffic
        seen.texts["front gateway log"] = front.log()
        assert front.process.returncode is not None

        # The upstream saw the front log in with its non-default root password: the topics
        # made through the front are there.
        up_streams = await in_asyncio(
            lambda: iggy_session(upstream.addresses["iggy"], "iggy", s.upstream)
        )
        assert "default" in up_streams and "iggy-secrets" in up_streams, up_streams
    seen.texts["upstream gateway log"] = upstream.log_path.read_text(errors="replace")
    seen.texts["access log"] = access_log.read_text()
    seen.texts["users store file"] = (tmp_path / "users.json").read_text()
    assert "alice" in seen.texts["access log"] and "bob" in seen.texts["access log"]
    assert "[debug" in seen.texts["front gateway log"]  # it did log at debug level

    assert {"front gateway", "upstream gateway"} <= seen.from_proc, seen.from_proc
    # The search finds a secret where one is: the backend URL (percent-encoded) in the config
    # file, and a password inside SASL PLAIN's base64 token.
    assert any(form in config.read_text() for form in encoded_forms(s.upstream))
    plain_token = base64.b64encode(b"\0alice\0" + s.alice.encode()).decode()
    assert any(form in plain_token for form in encoded_forms(s.alice))
    everything = dict(seen.texts)
    everything |= {f"argv of {name}": "\0".join(argv) for name, argv in seen.argvs.items()}
    leaks = [
        f"{what} ({form!r}) in {where}"
        for what, secret in s.all().items()
        for form in sorted(encoded_forms(secret))
        for where, text in everything.items()
        if form in text
    ]
    assert not leaks, "secrets leaked:\n" + "\n".join(leaks)


def _argv_of(gateway: Gateway) -> list[str]:
    cmdline = Path(f"/proc/{gateway.pid}/cmdline").read_bytes()
    return cmdline.decode(errors="replace").split("\0")


async def use_every_credential(
    s: Secrets, seen: Seen, front: Front, certs: Certs, files: dict[str, Path]
) -> dict[str, str]:
    """Each credential kind, with proof that it worked; the error texts of refused logins go
    into ``seen``. Returns the admin pages read afterwards."""
    base = kafka_tls(front, certs)
    plain = {**base, "security.protocol": "SASL_SSL", "sasl.mechanisms": "PLAIN",
             "sasl.username": "alice", "sasl.password": s.alice}  # fmt: skip
    scram = {**base, "security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512",
             "sasl.username": "bob", "sasl.password": s.bob}  # fmt: skip
    cert = {**base, "security.protocol": "SSL",
            "ssl.certificate.location": str(files["client cert"]),
            "ssl.key.location": str(files["client key"])}  # fmt: skip
    for name, conf in (("plain", plain), ("scram", scram), ("cert", cert)):
        values = [f"{name}-{i}".encode() for i in range(3)]
        got = await in_thread(partial(kafka_round_trip, conf, f"k-{name}", values))
        assert got == values, name
    assert "user=alice" in front.log()  # the certificate logged in as its CN

    iggy = front.addresses["iggy"]
    streams = await in_asyncio(lambda: iggy_session(iggy, "iggy", s.root, create="iggy-secrets"))
    assert "iggy-secrets" in streams

    rabbit = front.addresses["rabbitmq_stream"]
    await in_asyncio(lambda: rabbit_session(rabbit, "carol", s.carol, "rabbit-carol"))
    await in_asyncio(lambda: rabbit_session(rabbit, "guest", s.guest, "rabbit-guest"))

    # streamgate users, through the gateway's Iggy listener, every password from a file.
    forbidden = [s.root, s.dave, s.alice, s.bob, s.carol, s.guest, s.upstream, s.wrong]
    directory = front.log_path.parent
    made = await users_command(
        seen, "users create", "create", "dave", "--password-file", str(files["dave"]),
        "--url", f"iggy://iggy@{iggy}", "--login-password-file", str(files["root"]),
        cwd=directory, forbidden=forbidden,
    )  # fmt: skip
    assert any(line.split("\t")[1:2] == ["dave"] for line in made.out.splitlines()), made.out
    dave = {**base, "security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512",
            "sasl.username": "dave", "sasl.password": s.dave}  # fmt: skip
    assert await in_thread(lambda: kafka_logs_in(dave))
    await in_asyncio(lambda: iggy_session(iggy, "dave", s.dave, list_streams=False))
    made = await users_command(
        seen, "users tokens create", "tokens", "create", "secrets-test",
        "--url", f"iggy://alice@{iggy}", "--login-password-file", str(files["alice"]),
        cwd=directory, forbidden=forbidden,
    )  # fmt: skip
    s.token = made.out.strip()
    assert len(s.token) >= 32 and "\n" not in s.token, made.out
    token_streams = await in_asyncio(lambda: iggy_token_session(iggy, s.token))
    assert "iggy-secrets" in token_streams, token_streams

    # Wrong passwords last: failed logins from one address are slowed down (then refused for a
    # while), which would stand in the way of the good logins above.
    for mechanism in ("PLAIN", "SCRAM-SHA-512"):
        wrong = {**base, "security.protocol": "SASL_SSL", "sasl.mechanisms": mechanism,
                 "sasl.username": "alice", "sasl.password": s.wrong}  # fmt: skip
        texts = await in_thread(partial(kafka_refused, wrong))
        assert texts, mechanism
        seen.texts[f"kafka {mechanism} wrong password: client errors"] = "\n".join(texts)

    seen.texts["iggy wrong password: client error"] = await in_asyncio(
        lambda: iggy_refused(iggy, "alice", s.wrong)
    )
    seen.texts["rabbitmq stream wrong password: client error"] = await in_thread(
        partial(rabbit_refused_quietly, rabbit, "carol", s.wrong)
    )

    # SIGHUP: the TLS certificates and keys are re-read (whatever that logs is searched too).
    front.process.send_signal(signal.SIGHUP)
    await trio.sleep(0.5)
    return await admin_pages(front)


def kafka_logs_in(conf: dict[str, Any]) -> bool:
    """Whether a Metadata request is answered (it raises when the login fails)."""
    from confluent_kafka import Producer

    return Producer(conf).list_topics(timeout=10) is not None
