"""SASL PLAIN (RFC 4616 §2): ``[authzid] NUL authcid NUL passwd``, all UTF-8.

The one parser of the token Kafka's SaslAuthenticate and RabbitMQ Stream's SaslAuthenticate
carry. It checks the shape only: an empty authcid or passwd (which the RFC's grammar does not
allow) parses, and is left to the login to refuse like any other wrong credential.
"""

from __future__ import annotations

from dataclasses import dataclass


class MalformedPlain(ValueError):
    """The token is not ``[authzid] NUL authcid NUL passwd``."""


class PlainNotUtf8(MalformedPlain):
    """The token has the right shape, but a part of it is not UTF-8 (RFC 4616 §2)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PlainCredentials:
    authzid: str  # "" = act as the authcid
    authcid: str
    passwd: str


def parse_plain(token: bytes) -> PlainCredentials:
    parts = token.split(b"\0")
    if len(parts) != 3:
        raise MalformedPlain(
            f"a SASL PLAIN token has 2 NUL separators, this one has {len(parts) - 1}"
        )
    try:
        authzid, authcid, passwd = (part.decode("utf-8") for part in parts)
    except UnicodeDecodeError as exc:
        raise PlainNotUtf8(f"SASL PLAIN token is not UTF-8: {exc.reason}") from None
    return PlainCredentials(authzid=authzid, authcid=authcid, passwd=passwd)


__all__ = ["MalformedPlain", "PlainCredentials", "PlainNotUtf8", "parse_plain"]
