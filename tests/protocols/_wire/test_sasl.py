"""SASL PLAIN tokens (RFC 4616 §2): what parses, and the two ways a token is malformed."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocols._wire import MalformedPlain, PlainCredentials, PlainNotUtf8, parse_plain


def test_a_token_with_an_authzid() -> None:
    assert parse_plain(b"admin\0alice\0s3cret") == PlainCredentials(
        authzid="admin", authcid="alice", passwd="s3cret"
    )


def test_an_empty_authzid_is_acting_as_oneself() -> None:
    # What every client of the Kafka and RabbitMQ Stream listeners sends.
    assert parse_plain(b"\0alice\0s3cret") == PlainCredentials(
        authzid="", authcid="alice", passwd="s3cret"
    )


def test_utf8_parts_are_decoded() -> None:
    token = "\0jürgen\0pässwörd☃".encode()
    assert parse_plain(token) == PlainCredentials(authzid="", authcid="jürgen", passwd="pässwörd☃")


def test_empty_identity_and_password_parse() -> None:
    # Left to the login to refuse, like any other wrong credential.
    assert parse_plain(b"\0\0") == PlainCredentials(authzid="", authcid="", passwd="")


@pytest.mark.parametrize(
    "token",
    [b"", b"alice", b"alice\0s3cret", b"\0alice\0s3cret\0", b"a\0b\0c\0d", b"\0\0\0"],
    ids=["empty", "no NUL", "one NUL", "trailing NUL", "three NULs", "only NULs"],
)
def test_wrong_nul_counts_are_malformed(token: bytes) -> None:
    with pytest.raises(MalformedPlain, match="2 NUL separators") as info:
        parse_plain(token)
    assert not isinstance(info.value, PlainNotUtf8)


@pytest.mark.parametrize(
    "token",
    [b"\xff\0alice\0s3cret", b"\0al\xc3ice\0s3cret", b"\0alice\0s3cr\xe9t"],
    ids=["authzid", "authcid", "passwd"],
)
def test_a_part_that_is_not_utf8_is_malformed(token: bytes) -> None:
    with pytest.raises(PlainNotUtf8, match="not UTF-8"):
        parse_plain(token)


def test_not_utf8_is_a_kind_of_malformed() -> None:
    # A caller that does not care why catches one class.
    assert issubclass(PlainNotUtf8, MalformedPlain)
    assert issubclass(MalformedPlain, ValueError)


@given(st.binary(max_size=64))
def test_any_bytes_parse_or_raise_malformed(token: bytes) -> None:
    try:
        creds = parse_plain(token)
    except MalformedPlain:
        return
    encoded = (creds.authzid, creds.authcid, creds.passwd)
    assert b"\0".join(part.encode() for part in encoded) == token


@given(st.lists(st.text().filter(lambda t: "\0" not in t), min_size=3, max_size=3))
def test_round_trip(parts: list[str]) -> None:
    authzid, authcid, passwd = parts
    token = f"{authzid}\0{authcid}\0{passwd}".encode()
    assert parse_plain(token) == PlainCredentials(authzid=authzid, authcid=authcid, passwd=passwd)
