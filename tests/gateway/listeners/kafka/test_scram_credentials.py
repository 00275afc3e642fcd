"""Kafka's SCRAM credential APIs (KIP-554: DescribeUserScramCredentials 50,
AlterUserScramCredentials 51) on a real ``streamgate run`` with ``listeners.kafka.sasl=true``:
confluent-kafka's and kafka-python's admin clients set, describe and delete credentials, and the
clients then log in (or are refused) with them. Kafka's per-user errors, from the admin clients
where they can send the request and from a raw client where they refuse to (a user named twice,
an unknown mechanism, an empty name). No password, salted password or key reaches the log."""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import trio
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kafka import KafkaProducer  # type: ignore[import-untyped]
from kafka.admin import KafkaAdminClient  # type: ignore[import-untyped]
from kafka.admin import ScramMechanism as KpMechanism
from kafka.admin import UserScramCredentialDeletion as KpDeletion
from kafka.admin import UserScramCredentialUpsertion as KpUpsertion
from kafka.errors import ClusterAuthorizationFailedError  # type: ignore[import-untyped]
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode

from gateway.coordination import UserStore
from gateway.coordination.users import CONFIG_USER_PERMISSIONS
from gateway.listeners.kafka import scram_admin
from gateway.listeners.kafka.session import KafkaSettings, Session
from protocols._wire import RemoteProtocolError
from protocols.kafka.build import build
from protocols.kafka.framing import KafkaRequest, KafkaServerCodec
from protocols.kafka.versions import ADVERTISED, ApiKey
from tests.helpers.gateways import Gateway, running_gateway
from tests.helpers.kafka_raw import RawKafka
from tests.helpers.kafka_roundtrip import produce_and_take

from .conftest import in_thread

ALICE = "alice-Config-pw-1"  # a user from the configuration: data permissions only
ROOT = "root-pw-from-a-file"  # "iggy", the root: every permission
NEW = "carol-Kafka-pw-2"  # set through AlterUserScramCredentials
OTHER = "alice-Kafka-pw-3"
SECRETS = (ALICE, ROOT, NEW, OTHER)
N = 3
LIMIT_S = 60
# These tests fail logins on purpose, all from 127.0.0.1: no failed-login backoff (its own
# tests are in tests/gateway/coordination), or a refused login would hold up the next good one.
NO_BACKOFF = ("--set", "auth.login_failures=0")


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[Gateway]:
    users = tmp_path / "users.secret"
    users.write_text(f"alice:{ALICE}\n")
    root = tmp_path / "root.secret"
    root.write_text(ROOT + "\n")
    argv = ("--set", "listeners.kafka.sasl=true", *NO_BACKOFF,
            "--set", f"auth.users_password_file={users}",
            "--set", f"auth.root_password_file={root}")  # fmt: skip
    async with running_gateway("embedded:./data", tmp_path, "scram-admin", *argv) as gw:
        yield gw
    log = gw.log_path.read_text(errors="replace")
    leaked = [s for s in SECRETS if s in log]
    assert not leaked, "a password reached the gateway's log"
    # Nor a salted password, a key or a salt, in the forms a log line would show them.
    store = json.loads((tmp_path / "data" / "users.json").read_text())
    for user in store["users"]:
        for credential in user["scram"].values():
            for field in ("salt", "stored_key", "server_key"):
                raw = base64.b64decode(credential[field])
                assert credential[field] not in log and raw.hex() not in log


def _sasl(mechanism: str, user: str, password: str) -> dict[str, Any]:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": mechanism,
            "sasl.username": user, "sasl.password": password}  # fmt: skip


def _admin(gw: Gateway, user: str = "iggy", password: str = ROOT) -> AdminClient:
    return AdminClient({"bootstrap.servers": gw.kafka, **_sasl("SCRAM-SHA-512", user, password)})


def _upsert(user: str, mechanism: ScramMechanism, password: str, iterations: int) -> Any:
    return UserScramCredentialUpsertion(
        user, ScramCredentialInfo(mechanism, iterations), password.encode()
    )


def _describe(admin: AdminClient, user: str) -> dict[str, Any]:
    """confluent-kafka's answer for named users: a future per user."""
    futures = admin.describe_user_scram_credentials([user], request_timeout=20)
    assert isinstance(futures, dict)
    return futures


def _describe_all(admin: AdminClient) -> dict[str, Any]:
    """For every user (None): one future, of a dict by user."""
    future = admin.describe_user_scram_credentials(request_timeout=20)
    assert not isinstance(future, dict)
    everyone: dict[str, Any] = future.result(timeout=20)
    return everyone


def _error(future: Any) -> KafkaError:
    with pytest.raises(KafkaException) as info:
        future.result(timeout=20)
    error: KafkaError = info.value.args[0]
    return error


def _logs_in(gw: Gateway, mechanism: str, user: str, password: str) -> bool:
    """Whether a confluent-kafka client gets past SASL (Metadata answered: True) or is told its
    authentication failed (False), whichever comes first; neither within 20 s fails the test."""
    errors: list[KafkaError] = []
    p = Producer({"bootstrap.servers": gw.kafka, "error_cb": errors.append,
                  **_sasl(mechanism, user, password)})  # fmt: skip
    give_up = time.monotonic() + 20
    while time.monotonic() < give_up:
        try:
            p.list_topics(timeout=0.5)
        except KafkaException:
            p.poll(0.1)  # serves error_cb
            if any(e.code() == KafkaError._AUTHENTICATION for e in errors):
                return False
        else:
            return True
    raise AssertionError(f"neither logged in nor refused: {errors}")


def _round_trip(gw: Gateway, topic: str, creds: dict[str, Any]) -> list[bytes]:
    return produce_and_take(gw.kafka, topic, N, creds)


def _grant(tmp_path: Path, user: str) -> None:
    """What ``streamgate users grant`` does: change the gateway's users file under its lock;
    the gateway takes the change in on its next lookup."""
    store = UserStore(path=tmp_path / "data" / "users.json", root_password=ROOT)
    store.update_permissions(user, CONFIG_USER_PERMISSIONS)


async def test_confluent_upsert_login_describe_delete(gateway: Gateway, tmp_path: Path) -> None:
    def upsert_and_describe() -> None:
        admin = _admin(gateway)
        done = admin.alter_user_scram_credentials(
            [_upsert("carol", ScramMechanism.SCRAM_SHA_512, NEW, 8192)], request_timeout=20
        )
        assert set(done) == {"carol"}
        assert done["carol"].result(timeout=20) is None
        described = _describe(admin, "carol")
        info = described["carol"].result(timeout=20)
        assert info.user == "carol"
        assert [(i.mechanism, i.iterations) for i in info.scram_credential_infos] == [
            (ScramMechanism.SCRAM_SHA_512, 8192)
        ]
        everyone = _describe_all(admin)
        # The root, RabbitMQ's default user and the configured user got both mechanisms from
        # their passwords.
        assert set(everyone) == {"iggy", "guest", "alice", "carol"}
        alice = everyone["alice"].scram_credential_infos
        assert sorted((i.mechanism.value, i.iterations) for i in alice) == [(1, 4096), (2, 4096)]

    await in_thread(upsert_and_describe, limit_s=LIMIT_S)
    # A new account has no permissions (a Kafka user without ACLs) but logs in.
    assert await in_thread(lambda: _logs_in(gateway, "SCRAM-SHA-512", "carol", NEW))
    _grant(tmp_path, "carol")
    creds = _sasl("SCRAM-SHA-512", "carol", NEW)
    got = await in_thread(lambda: _round_trip(gateway, "t-carol", creds), limit_s=LIMIT_S)
    assert got == [b"v%d" % i for i in range(N)]
    # Only that mechanism, only that password: no SCRAM-SHA-256 credential, no PLAIN password.
    for mechanism, password in (("SCRAM-SHA-512", "not-the-password"),
                                ("SCRAM-SHA-256", NEW), ("PLAIN", NEW)):  # fmt: skip
        assert not await in_thread(partial(_logs_in, gateway, mechanism, "carol", password))

    def delete() -> None:
        admin = _admin(gateway)
        deletion = UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_512)
        done = admin.alter_user_scram_credentials([deletion], request_timeout=20)
        assert done["carol"].result(timeout=20) is None
        described = _describe(admin, "carol")
        assert _error(described["carol"]).code() == KafkaError.RESOURCE_NOT_FOUND
        again = admin.alter_user_scram_credentials([deletion], request_timeout=20)
        assert _error(again["carol"]).code() == KafkaError.RESOURCE_NOT_FOUND

    await in_thread(delete, limit_s=LIMIT_S)
    assert not await in_thread(lambda: _logs_in(gateway, "SCRAM-SHA-512", "carol", NEW))


async def test_confluent_unacceptable_iterations(gateway: Gateway) -> None:
    def work() -> None:
        admin = _admin(gateway)
        for iterations in (1000, 4095, 16385):
            done = admin.alter_user_scram_credentials(
                [_upsert("dave", ScramMechanism.SCRAM_SHA_256, NEW, iterations)],
                request_timeout=20,
            )
            error = _error(done["dave"])
            assert error.code() == KafkaError.UNACCEPTABLE_CREDENTIAL, (iterations, error)
        described = _describe(admin, "dave")
        assert _error(described["dave"]).code() == KafkaError.RESOURCE_NOT_FOUND

    await in_thread(work, limit_s=LIMIT_S)
    assert not await in_thread(lambda: _logs_in(gateway, "SCRAM-SHA-256", "dave", NEW))


async def test_confluent_non_admin_is_refused(gateway: Gateway) -> None:
    def work() -> None:
        admin = _admin(gateway, "alice", ALICE)  # data permissions, no manage/read_users
        done = admin.alter_user_scram_credentials(
            [_upsert("mallory", ScramMechanism.SCRAM_SHA_512, NEW, 4096),
             UserScramCredentialDeletion("iggy", ScramMechanism.SCRAM_SHA_512)],
            request_timeout=20,
        )  # fmt: skip
        for user in ("mallory", "iggy"):
            assert _error(done[user]).code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
        # Not asked here: the refused Describe, whose top-level error (Kafka's answer, and
        # ours) librdkafka 2.16 reports and then frees a string it does not own, aborting the
        # process. kafka-python and the raw client below check that answer.

    await in_thread(work, limit_s=LIMIT_S)
    # Nothing changed: no mallory, the root's SCRAM-SHA-512 login still works.
    assert not await in_thread(lambda: _logs_in(gateway, "SCRAM-SHA-512", "mallory", NEW))
    assert await in_thread(lambda: _logs_in(gateway, "SCRAM-SHA-512", "iggy", ROOT))
    with trio.fail_after(20):
        async with await trio.open_tcp_stream("127.0.0.1", gateway.port("kafka")) as stream:
            raw = RawKafka(stream)
            await raw.login("alice", ALICE)
            for users in (None, [{"name": "iggy"}]):
                answer = await raw.ask(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": users})
                assert (answer.error_code, answer.error_message, answer.results) == (
                    ErrorCode.cluster_authorization_failed,
                    "Cluster authorization failed.",
                    (),
                )
            answer = await raw.ask(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, {
                "deletions": [{"name": "zed", "mechanism": 1}],
                "upsertions": [_upsertion("bob"), _upsertion("zed")],
            })  # fmt: skip
            # Kafka's getErrorResponse: every user named, once, in name order
            assert [(r.user, r.error_code) for r in answer.results] == [
                ("bob", ErrorCode.cluster_authorization_failed),
                ("zed", ErrorCode.cluster_authorization_failed),
            ]


async def test_upsert_for_an_existing_user_retires_its_password(gateway: Gateway) -> None:
    def work() -> list[tuple[int, int]]:
        admin = _admin(gateway)
        done = admin.alter_user_scram_credentials(
            [_upsert("alice", ScramMechanism.SCRAM_SHA_512, OTHER, 10000)], request_timeout=20
        )
        assert done["alice"].result(timeout=20) is None
        described = _describe(admin, "alice")
        info = described["alice"].result(timeout=20)
        return sorted((i.mechanism.value, i.iterations) for i in info.scram_credential_infos)

    # SCRAM-SHA-256 keeps the credential it had (Kafka keeps mechanisms apart).
    assert await in_thread(work, limit_s=LIMIT_S) == [(1, 4096), (2, 10000)]
    cases = [("SCRAM-SHA-512", OTHER, True), ("SCRAM-SHA-512", ALICE, False),
             ("PLAIN", ALICE, False), ("PLAIN", OTHER, False),
             ("SCRAM-SHA-256", ALICE, True)]  # fmt: skip
    for mechanism, password, ok in cases:
        got = await in_thread(partial(_logs_in, gateway, mechanism, "alice", password))
        assert got is ok, (mechanism, password == ALICE)


async def test_kafka_python_admin(gateway: Gateway, tmp_path: Path) -> None:
    root = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-256",
            "sasl_plain_username": "iggy", "sasl_plain_password": ROOT}  # fmt: skip

    def alter() -> None:
        admin = KafkaAdminClient(bootstrap_servers=gateway.kafka, request_timeout_ms=20_000,
                                 **root)  # fmt: skip
        try:
            got = admin.alter_user_scram_credentials(
                [KpUpsertion("erin", KpMechanism.SCRAM_SHA_256, NEW, iterations=4096),
                 KpUpsertion("frank", KpMechanism.SCRAM_SHA_512, NEW, iterations=100),
                 KpDeletion("nobody", KpMechanism.SCRAM_SHA_256)]
            )  # fmt: skip
            assert got == {
                "erin": None,
                "frank": "Too few iterations",
                "nobody": "Attempt to delete a user credential that does not exist",
            }
            described = admin.describe_user_scram_credentials(["erin", "frank"])
            assert described["erin"] == {
                "error": None,
                "credential_infos": [{"mechanism": KpMechanism.SCRAM_SHA_256, "iterations": 4096}],
            }
            assert described["frank"]["error"].startswith("Attempt to describe a user credential")
            assert set(admin.describe_user_scram_credentials()) == {
                "iggy",
                "guest",
                "alice",
                "erin",
            }
        finally:
            admin.close()

    await in_thread(alter, limit_s=LIMIT_S)
    _grant(tmp_path, "erin")

    def produce() -> None:
        p = KafkaProducer(bootstrap_servers=gateway.kafka, security_protocol="SASL_PLAINTEXT",
                          sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="erin",
                          sasl_plain_password=NEW)  # fmt: skip
        try:
            p.send("t-erin", b"hello").get(timeout=20)
        finally:
            p.close()

    await in_thread(produce, limit_s=LIMIT_S)

    def refused() -> None:
        creds = {**root, "sasl_plain_username": "alice", "sasl_plain_password": ALICE}
        admin = KafkaAdminClient(bootstrap_servers=gateway.kafka, request_timeout_ms=20_000,
                                 **creds)  # fmt: skip
        try:
            with pytest.raises(ClusterAuthorizationFailedError):
                admin.describe_user_scram_credentials()
            got = admin.alter_user_scram_credentials(
                [KpDeletion("erin", KpMechanism.SCRAM_SHA_256)]
            )
            assert got == {"erin": "Cluster authorization failed."}
        finally:
            admin.close()

    await in_thread(refused, limit_s=LIMIT_S)


async def test_a_restarted_gateway_keeps_the_credentials(tmp_path: Path) -> None:
    root = tmp_path / "root.secret"
    root.write_text(ROOT + "\n")
    argv = ("--set", "listeners.kafka.sasl=true", *NO_BACKOFF,
            "--set", f"auth.root_password_file={root}")  # fmt: skip
    async with running_gateway("embedded:./data", tmp_path, "first", *argv) as gw:

        def upsert() -> None:
            admin = _admin(gw)  # kept until the answer: a destroyed client drops its futures
            done = admin.alter_user_scram_credentials(
                [_upsert("grace", ScramMechanism.SCRAM_SHA_512, NEW, 4096)], request_timeout=20
            )
            assert done["grace"].result(timeout=20) is None

        await in_thread(upsert, limit_s=LIMIT_S)
    stored = (tmp_path / "data" / "users.json").read_text()
    assert NEW not in stored
    async with running_gateway("embedded:./data", tmp_path, "second", *argv) as gw:
        assert await in_thread(lambda: _logs_in(gw, "SCRAM-SHA-512", "grace", NEW))
        assert not await in_thread(lambda: _logs_in(gw, "PLAIN", "grace", NEW))


# -- a raw client: what the admin clients refuse to send, and the bytes on the wire ------------


def _upsertion(name: str, mechanism: int = 2, **changes: Any) -> dict[str, Any]:
    salt = b"s" * 16
    salted = hashlib.pbkdf2_hmac("sha512", NEW.encode(), salt, 4096)
    return {"name": name, "mechanism": mechanism, "iterations": 4096, "salt": salt,
            "salted_password": salted, **changes}  # fmt: skip


def _codes(answer: Any) -> dict[str, tuple[ErrorCode, str | None]]:
    return {r.user: (r.error_code, r.error_message) for r in answer.results}


async def test_raw_per_user_errors(gateway: Gateway) -> None:
    with trio.fail_after(30):
        async with await trio.open_tcp_stream("127.0.0.1", gateway.port("kafka")) as stream:
            raw = RawKafka(stream)
            await raw.login("iggy", ROOT)
            answer = await raw.ask(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, {
                "deletions": [{"name": "twice", "mechanism": 1}, {"name": "alice", "mechanism": 3}],
                "upsertions": [
                    _upsertion("twice"), _upsertion(""), _upsertion("heidi", mechanism=0),
                    _upsertion("ivan", salt=b""), _upsertion("judy", salted_password=b"x" * 32),
                    _upsertion("ok"),  # two bytes: too short a name for a new account
                    _upsertion("kim"), _upsertion("kim"), _upsertion("kim"),
                    _upsertion("leo"),
                ],
            })  # fmt: skip
            dup = (ErrorCode.duplicate_resource,
                   "A user credential cannot be altered twice in the same request")  # fmt: skip
            unacceptable = ErrorCode.unacceptable_credential
            assert _codes(answer) == {
                "twice": dup,
                "alice": (ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"),
                "": (unacceptable, "Username must not be empty"),
                "heidi": (ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"),
                "ivan": (unacceptable, "The salt must not be empty"),
                "judy": (unacceptable, "A SCRAM-SHA-512 salted password has 64 bytes, not 32"),
                "ok": (unacceptable, "username must have 3..50 bytes"),
                "kim": dup,
                "leo": (ErrorCode.none, None),
            }
            assert [r.user for r in answer.results][:3] == ["twice", "alice", ""]  # as named
            described = await raw.ask(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {
                "users": [{"name": "leo"}, {"name": "kim"}, {"name": "alice"}, {"name": "alice"}],
            })  # fmt: skip
            assert described.error_code == ErrorCode.none
            assert {r.user: (r.error_code, [(c.mechanism, c.iterations)
                                            for c in r.credential_infos])
                    for r in described.results} == {
                "leo": (ErrorCode.none, [(2, 4096)]),
                "kim": (ErrorCode.resource_not_found, []),
                "alice": (ErrorCode.duplicate_resource, []),
            }  # fmt: skip
            everyone = await raw.ask(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": []})
            assert {r.user for r in everyone.results} == {"iggy", "guest", "alice", "leo"}
    assert await in_thread(lambda: _logs_in(gateway, "SCRAM-SHA-512", "leo", NEW))


# -- the codec: flexible-only versions, tagged-field sections, hand-written bytes ---------------


def _uvarint(n: int) -> bytes:
    out = b""
    while n >= 0x80:
        out += bytes([n & 0x7F | 0x80])
        n >>= 7
    return out + bytes([n])


def _compact(data: bytes | None) -> bytes:
    return b"\x00" if data is None else _uvarint(len(data) + 1) + data


def _header_v2(api_key: int, correlation_id: int) -> bytes:
    # request header v2: key, version 0, correlation id, (non-compact) client id, no tags
    return (api_key.to_bytes(2, "big") + b"\x00\x00" + correlation_id.to_bytes(4, "big")
            + b"\x00\x03raw" + b"\x00")  # fmt: skip


def test_requests_from_hand_written_bytes() -> None:
    salt, salted = b"salt", bytes(range(64))
    alter = (_header_v2(51, 7)
             + _uvarint(2) + _compact(b"bob") + b"\x01" + b"\x00"
             + _uvarint(2) + _compact(b"amy") + b"\x02" + (8192).to_bytes(4, "big")
             + _compact(salt) + _compact(salted) + b"\x00"
             + b"\x00")  # fmt: skip
    req = KafkaServerCodec(ADVERTISED).decode_request(alter)
    assert isinstance(req, KafkaRequest) and (req.api_key, req.client_id) == (51, "raw")
    (d,) = req.body.deletions
    (u,) = req.body.upsertions
    assert (d.name, d.mechanism) == ("bob", 1)
    assert (u.name, u.mechanism, u.iterations, u.salt, u.salted_password) == (
        "amy",
        2,
        8192,
        salt,
        salted,
    )
    for users, expected in ((b"\x00", None), (_uvarint(2) + _compact(b"amy") + b"\x00", ("amy",))):
        req = KafkaServerCodec(ADVERTISED).decode_request(_header_v2(50, 8) + users + b"\x00")
        assert isinstance(req, KafkaRequest)
        got = req.body.users
        assert (None if got is None else tuple(n.name for n in got)) == expected


# librdkafka 2.16.0's AlterUserScramCredentials deleting carol's SCRAM-SHA-512 credential, as
# it sent it to the gateway (size prefix removed): header v2, the deletion, no upsertions, the
# request's empty tagged-field section, and then a second one (the last 00), which it always adds.
LIBRDKAFKA_ALTER = bytes.fromhex("0033000000000004000772646b61666b610002066361726f6c0200010000")


def test_librdkafkas_extra_tag_section_is_let_through_and_nothing_else() -> None:
    req = KafkaServerCodec(ADVERTISED).decode_request(LIBRDKAFKA_ALTER)
    assert isinstance(req, KafkaRequest) and req.client_id == "rdkafka"
    assert [(d.name, d.mechanism) for d in req.body.deletions] == [("carol", 2)]
    assert req.body.upsertions == ()
    for frame in (LIBRDKAFKA_ALTER + b"\x00", LIBRDKAFKA_ALTER[:-1] + b"\x01",
                  _header_v2(50, 1) + b"\x00" + b"\x00" + b"\x00"):  # fmt: skip
        with pytest.raises(RemoteProtocolError, match="bytes after the body"):
            KafkaServerCodec(ADVERTISED).decode_request(frame)


def test_responses_to_hand_written_bytes() -> None:
    """Response header v1 (correlation id, no tags) and flexible bodies with a zero tag count
    after every struct: kio writes exactly this (and no tagged field, kafka.md §1.4 trap 2)."""
    server = KafkaServerCodec(ADVERTISED)
    req = server.decode_request(_header_v2(50, 9) + b"\x00" + b"\x00")
    assert isinstance(req, KafkaRequest)
    body = build(load_response_schema(50, 0), {
        "throttle_time": 0, "error_code": 0, "error_message": None, "results": [
            {"user": "amy", "error_code": 0, "error_message": None,
             "credential_infos": [{"mechanism": 2, "iterations": 8192}]},
            {"user": "bob", "error_code": 91, "error_message": "gone", "credential_infos": []},
        ]})  # fmt: skip
    expected = ((9).to_bytes(4, "big") + b"\x00"
                + b"\x00\x00\x00\x00" + b"\x00\x00" + _compact(None) + _uvarint(3)
                + _compact(b"amy") + b"\x00\x00" + _compact(None)
                + _uvarint(2) + b"\x02" + (8192).to_bytes(4, "big") + b"\x00" + b"\x00"
                + _compact(b"bob") + (91).to_bytes(2, "big") + _compact(b"gone") + _uvarint(1)
                + b"\x00"
                + b"\x00")  # fmt: skip
    assert server.send(req, body) == len(expected).to_bytes(4, "big") + expected
    req = server.decode_request(_header_v2(51, 10) + b"\x01" + b"\x01" + b"\x00")
    assert isinstance(req, KafkaRequest)
    body = build(load_response_schema(51, 0), {"throttle_time": 0, "results": [
        {"user": "amy", "error_code": 93, "error_message": "Too few iterations"}]})  # fmt: skip
    expected = ((10).to_bytes(4, "big") + b"\x00" + b"\x00\x00\x00\x00" + _uvarint(2)
                + _compact(b"amy") + (93).to_bytes(2, "big") + _compact(b"Too few iterations")
                + b"\x00" + b"\x00")  # fmt: skip
    assert server.send(req, body) == len(expected).to_bytes(4, "big") + expected


# -- a listener without a user store -----------------------------------------------------------


def _storeless_session() -> Session:
    service = SimpleNamespace(
        router=SimpleNamespace(authorizer=None), settings=KafkaSettings(), versions=ADVERTISED,
        users=None,
    )  # fmt: skip
    return Session(service, SimpleNamespace(), "127.0.0.1", 9092)  # type: ignore[arg-type]


def _request(api_key: int, values: dict[str, Any]) -> KafkaRequest:
    body = build(load_request_schema(api_key, 0), values)
    return KafkaRequest(api_key=api_key, api_version=0, correlation_id=1, client_id=None,
                        body=body, size=0)  # fmt: skip


async def test_without_a_user_store() -> None:
    """Described as a broker without SCRAM credentials; every alteration UNSUPPORTED_VERSION,
    as a KRaft broker whose metadata version cannot store them (the first mention of a user is
    refused, so a second one is not counted a duplicate)."""
    session = _storeless_session()
    everyone = await scram_admin.describe_user_scram_credentials(
        session, _request(50, {"users": None})
    )
    assert everyone.error_code == ErrorCode.none and everyone.results == ()
    named = await scram_admin.describe_user_scram_credentials(
        session, _request(50, {"users": [{"name": "amy"}]})
    )
    assert [(r.user, r.error_code) for r in named.results] == [
        ("amy", ErrorCode.resource_not_found)
    ]
    altered = await scram_admin.alter_user_scram_credentials(session, _request(51, {
        "deletions": [{"name": "bob", "mechanism": 1}],
        "upsertions": [_upsertion("amy"), _upsertion("bob")],
    }))  # fmt: skip
    assert {r.user: r.error_code for r in altered.results} == {
        "bob": ErrorCode.unsupported_version,
        "amy": ErrorCode.unsupported_version,
    }
