"""SCRAM (RFC 5802, RFC 7677) in Kafka's flavour: the RFC's test vector, both roles, and every
malformed or foreign message refused with the module's own errors."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocols._wire.scram import (
    MalformedScram,
    ScramClient,
    ScramMismatch,
    ScramServer,
    derive_keys,
    parse_client_first,
    salted_password,
    verify_transcript,
)

# RFC 7677 §3: user "user", password "pencil".
CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_rfc7677_vector_server_role() -> None:
    keys = derive_keys("SCRAM-SHA-256", "pencil", salt=SALT, iterations=4096)
    first = parse_client_first(CLIENT_FIRST)
    assert (first.username, first.nonce, first.gs2_header) == (
        "user",
        "rOprNGfwEbeRWgbNEkqO",
        "n,,",
    )
    server = ScramServer(
        "SCRAM-SHA-256", first, salt=SALT, iterations=4096, server_nonce=SERVER_NONCE
    )
    assert server.server_first == SERVER_FIRST
    transcript = server.receive_client_final(CLIENT_FINAL)
    assert verify_transcript("SCRAM-SHA-256", keys.stored_key, transcript)
    assert server.server_final(transcript, keys.server_key) == SERVER_FINAL
    wrong = derive_keys("SCRAM-SHA-256", "pencil!", salt=SALT, iterations=4096)
    assert not verify_transcript("SCRAM-SHA-256", wrong.stored_key, transcript)


def test_rfc7677_vector_client_role() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert client.client_first() == CLIENT_FIRST
    assert client.client_final(SERVER_FIRST) == CLIENT_FINAL
    client.check_server_final(SERVER_FINAL)
    with pytest.raises(ScramMismatch):
        client.check_server_final(b"v=" + base64.b64encode(b"\0" * 32))


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("username", ["alice", "a,b=c", "ünïcode"])
def test_round_trip_with_escaped_names_and_kafka_tokenauth(mechanism: str, username: str) -> None:
    keys = derive_keys(mechanism, "pässword", salt=b"s" * 24, iterations=4096)
    client = ScramClient(mechanism, username, "pässword", nonce="abc", extensions=",tokenauth=true")
    first = parse_client_first(client.client_first())
    assert first.username == username and first.extensions == {"tokenauth": "true"}
    server = ScramServer(mechanism, first, salt=keys.salt, iterations=4096, server_nonce="xyz")
    transcript = server.receive_client_final(client.client_final(server.server_first))
    assert verify_transcript(mechanism, keys.stored_key, transcript)
    client.check_server_final(server.server_final(transcript, keys.server_key))


@pytest.mark.parametrize(
    "message",
    [
        b"",
        b"n,,",
        b"p=tls-unique,,n=user,r=abc",  # channel binding: not in Kafka's SCRAM
        b"x,,n=user,r=abc",
        b"n,z=user,n=user,r=abc",
        b"n,,n=user",
        b"n,,r=abc,n=user",
        b"n,,n=,r=abc",
        b"n,,n=user,r=",
        b"n,,n=us=er,r=abc",  # "=" not escaped
        b"n,,n=user,r=a,bc",  # "," ends the nonce: a malformed extension "bc"
        b"n,,m=ext,n=user,r=abc",
        b"n,,n=user,r=abc,tokenauth=true,tokenauth=true",
        b"n,a=other,n=user,r=abc",  # acting as someone else
        b"n,,n=\xff,r=abc",
        b"n,,n=user\0,r=abc",
    ],
)
def test_malformed_client_first(message: bytes) -> None:
    with pytest.raises(MalformedScram):
        parse_client_first(message)


def _server(mechanism: str = "SCRAM-SHA-256") -> tuple[ScramClient, ScramServer]:
    client = ScramClient(mechanism, "user", "pencil", nonce="cnonce")
    first = parse_client_first(client.client_first())
    return client, ScramServer(mechanism, first, salt=SALT, iterations=4096, server_nonce="s1")


@pytest.mark.parametrize(
    "message",
    [
        b"",
        b"c=biws,r=cnonces1",  # no proof
        b"c=biws,r=cnonces1,p=!!!",
        b"c=biws,r=cnonces1,p=" + base64.b64encode(b"short"),
        b"r=cnonces1,p=" + base64.b64encode(b"\0" * 32),
        b"c=biws,p=" + base64.b64encode(b"\0" * 32),
        b"c=biws,r=cnonces1,junk,p=" + base64.b64encode(b"\0" * 32),
        b"c=biws,r=cnonces1,p=" + base64.b64encode(b"\0" * 32) + b"\xff",
    ],
)
def test_malformed_client_final(message: bytes) -> None:
    _, server = _server()
    with pytest.raises(MalformedScram):
        server.receive_client_final(message)


def test_a_replayed_proof_belongs_to_another_exchange() -> None:
    client, server = _server()
    final = client.client_final(server.server_first)
    server.receive_client_final(final)
    # The same client-final message sent into a new exchange (another server nonce).
    _, other = _server()
    other = ScramServer("SCRAM-SHA-256", other.first, salt=SALT, iterations=4096, server_nonce="s2")
    with pytest.raises(ScramMismatch):
        other.receive_client_final(final)


def _librdkafka_final(server_first: bytes, bare: bytes, client_nonce: bytes) -> bytes:
    """What librdkafka before 2.6.1 answers (librdkafka#4895): its own nonce in front of the
    combined one, with the proof over that very message."""
    combined = server_first.split(b",")[0].removeprefix(b"r=")
    head = b"c=biws,r=" + client_nonce + combined
    auth_message = bare + b"," + server_first + b"," + head
    salted = salted_password("SCRAM-SHA-256", "pencil", SALT, 4096)
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    signature = hmac.new(hashlib.sha256(client_key).digest(), auth_message, "sha256").digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    return head + b",p=" + base64.b64encode(proof)


def test_librdkafka_before_2_6_1_repeats_its_nonce_and_is_understood() -> None:
    keys = derive_keys("SCRAM-SHA-256", "pencil", salt=SALT, iterations=4096)
    _, server = _server()
    final = _librdkafka_final(server.server_first, b"n=user,r=cnonce", b"cnonce")
    assert b",r=cnoncecnonces1," in final
    transcript = server.receive_client_final(final)
    assert verify_transcript("SCRAM-SHA-256", keys.stored_key, transcript)
    # Only that form: any other prefix, or the server nonce missing, is another exchange's.
    for prefix in (b"x", b"cnoncecnonce", b"cnonc"):
        _, server = _server()
        with pytest.raises(ScramMismatch):
            server.receive_client_final(
                _librdkafka_final(server.server_first, b"n=user,r=cnonce", prefix)
            )


def test_a_channel_binding_other_than_the_gs2_header_is_refused() -> None:
    client, server = _server()
    final = client.client_final(server.server_first).replace(b"c=biws", b"c=eSws")  # "y,,"
    with pytest.raises(ScramMismatch):
        server.receive_client_final(final)


def test_derive_keys_refuses_iterations_kafka_refuses() -> None:
    for iterations in (4095, 16385):
        with pytest.raises(ValueError):
            derive_keys("SCRAM-SHA-256", "pw", salt=b"s" * 16, iterations=iterations)
    with pytest.raises(ValueError):
        derive_keys("SCRAM-SHA-1", "pw", salt=b"s" * 16, iterations=4096)


@given(st.binary(max_size=200))
def test_any_bytes_parse_or_raise_malformed(data: bytes) -> None:
    with contextlib.suppress(MalformedScram):
        parse_client_first(data)
    _, server = _server()
    try:
        transcript = server.receive_client_final(data)
    except (MalformedScram, ScramMismatch):
        return
    assert not verify_transcript("SCRAM-SHA-256", b"\0" * 32, transcript)
