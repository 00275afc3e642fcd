"""SASL SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka speaks them, both roles.

Kafka's flavour (KIP-84): no channel binding (GS2 header ``n,,``, or ``n,a=<authzid>,`` naming
the user itself), SASLprep is not applied (Kafka's ScramFormatter takes the password's UTF-8
bytes as they are, and so do librdkafka, kafka-python and aiokafka), and the client-first message
may carry extensions after the nonce (``tokenauth=true`` for delegation tokens, KIP-48), written
``key=value`` with keys longer than RFC 5802's one letter.

The server side is split where the secrets are: ``parse_client_first`` says who logs in;
``ScramServer`` (given that user's salt and iteration count and a fresh nonce) writes the
server-first message and checks the client-final one's shape, channel binding and nonce, giving
the exchange's ``transcript``; ``verify_transcript`` checks the proof in it against the stored
key; ``server_final`` signs it with the server key. Only hashlib/hmac: SaltedPassword is
PBKDF2-HMAC (RFC 5802 §2.2 Hi() is PBKDF2 with one block).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from dataclasses import dataclass

# mechanism -> hashlib name (RFC 7677 §3; Kafka's ScramMechanism)
HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_ITERATIONS = 4096  # Kafka's ScramMechanism minimum for both
MAX_ITERATIONS = 16384  # and its maximum
_GS2_NO_BINDING = ("n,", "y,")  # "y": the client could bind, but thinks we cannot (§6)


class MalformedScram(ValueError):
    """A SCRAM message that does not follow the grammar of RFC 5802 §7 (Kafka's flavour)."""


class ScramMismatch(ValueError):
    """A well-formed client-final message that belongs to another exchange: a nonce or a channel
    binding that is not this exchange's (a replay, or a confused client)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientFirst:
    gs2_header: str  # "n,," or "n,a=<authzid>,"
    username: str  # unescaped (=2C -> ",", =3D -> "=")
    nonce: str
    extensions: dict[str, str]  # Kafka's, e.g. {"tokenauth": "true"}
    bare: str  # client-first-message-bare, as sent: part of the AuthMessage


@dataclass(frozen=True, slots=True, kw_only=True)
class ScramKeys:
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes


def _hash(mechanism: str) -> str:
    try:
        return HASHES[mechanism]
    except KeyError:
        raise ValueError(f"not a SCRAM mechanism: {mechanism!r}") from None


def _hmac(name: str, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, name).digest()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise MalformedScram(f"{what} is not base64") from None


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(_hash(mechanism), password.encode("utf-8"), salt, iterations)


def derive_keys(mechanism: str, password: str, *, salt: bytes, iterations: int) -> ScramKeys:
    """What a server keeps for a password (RFC 5802 §3): StoredKey and ServerKey, never it."""
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"SCRAM iterations must be {MIN_ITERATIONS}..{MAX_ITERATIONS}")
    salted = salted_password(mechanism, password, salt, iterations)
    return keys_from_salted_password(mechanism, salted, salt=salt, iterations=iterations)


def keys_from_salted_password(
    mechanism: str, salted: bytes, *, salt: bytes, iterations: int
) -> ScramKeys:
    """StoredKey and ServerKey from SaltedPassword (RFC 5802 §3), which Kafka's
    AlterUserScramCredentials carries (KIP-554: the client salts, the broker derives)."""
    name = _hash(mechanism)
    client_key = _hmac(name, salted, b"Client Key")
    return ScramKeys(
        salt=salt,
        iterations=iterations,
        stored_key=hashlib.new(name, client_key).digest(),
        server_key=_hmac(name, salted, b"Server Key"),
    )


def _decode(data: bytes, what: str) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedScram(f"the {what} message is not UTF-8") from None
    if "\0" in text:
        raise MalformedScram(f"the {what} message contains NUL")
    return text


def _unescape_saslname(name: str) -> str:
    # RFC 5802 §5.1: "," and "=" are sent as "=2C" and "=3D"; any other "=" is malformed.
    parts = name.split("=")
    out = [parts[0]]
    for part in parts[1:]:
        if part[:2] == "2C":
            out.append("," + part[2:])
        elif part[:2] == "3D":
            out.append("=" + part[2:])
        else:
            raise MalformedScram("a username has an '=' that is not =2C or =3D")
    return "".join(out)


def escape_saslname(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _valid_nonce(nonce: str) -> bool:
    # printable ASCII except "," (RFC 5802 §7)
    return bool(nonce) and all(0x21 <= ord(c) <= 0x7E and c != "," for c in nonce)


def _attribute(part: str, key: str, what: str) -> str:
    if not part.startswith(key + "="):
        raise MalformedScram(f"the {what} message lacks {key}=")
    return part[len(key) + 1 :]


def parse_client_first(data: bytes) -> ClientFirst:
    text = _decode(data, "client-first")
    for gs2 in _GS2_NO_BINDING:
        if text.startswith(gs2):
            break
    else:
        # "p=..." asks for channel binding, which Kafka's SCRAM does not do
        raise MalformedScram("the client-first message must start with 'n,' (no channel binding)")
    authzid_end = text.find(",", 2)
    if authzid_end < 0:
        raise MalformedScram("the client-first message has no GS2 header")
    authzid = text[2:authzid_end]
    if authzid and not authzid.startswith("a="):
        raise MalformedScram("the GS2 header's authzid must be a=<name>")
    gs2_header, bare = text[: authzid_end + 1], text[authzid_end + 1 :]
    parts = bare.split(",")
    if len(parts) < 2:
        raise MalformedScram("the client-first message needs n= and r=")
    if parts[0].startswith("m="):
        raise MalformedScram("mandatory extensions (m=) are not supported")
    username = _unescape_saslname(_attribute(parts[0], "n", "client-first"))
    nonce = _attribute(parts[1], "r", "client-first")
    if not username or not _valid_nonce(nonce):
        raise MalformedScram("the client-first message has an empty username or a bad nonce")
    if authzid and _unescape_saslname(authzid[2:]) != username:
        raise MalformedScram("the authzid must be the username itself")
    extensions: dict[str, str] = {}
    for part in parts[2:]:
        key, sep, value = part.partition("=")
        if not sep or not key or key in extensions:
            raise MalformedScram("the client-first message has a malformed extension")
        extensions[key] = value
    return ClientFirst(
        gs2_header=gs2_header, username=username, nonce=nonce, extensions=extensions, bare=bare
    )


class ScramServer:
    """One exchange after the client-first message: writes server-first, reads client-final."""

    def __init__(
        self,
        mechanism: str,
        first: ClientFirst,
        *,
        salt: bytes,
        iterations: int,
        server_nonce: str,
    ) -> None:
        _hash(mechanism)
        if not _valid_nonce(server_nonce):
            raise ValueError("the server nonce must be printable ASCII without ','")
        self.mechanism = mechanism
        self.first = first
        self.nonce = first.nonce + server_nonce
        self.server_first = f"r={self.nonce},s={_b64(salt)},i={iterations}".encode("ascii")

    def receive_client_final(self, data: bytes) -> bytes:
        """The exchange's transcript (AuthMessage, then ``,p=`` and the client's proof) for
        ``verify_transcript``: the client-final message checked for shape, binding and nonce."""
        text = _decode(data, "client-final")
        head, sep, proof_b64 = text.rpartition(",p=")
        if not sep:
            raise MalformedScram("the client-final message has no proof (p=)")
        proof = _unb64(proof_b64, "the proof")
        if len(proof) != hashlib.new(_hash(self.mechanism)).digest_size:
            raise MalformedScram("the proof has the wrong length")
        parts = head.split(",")
        if len(parts) < 2:
            raise MalformedScram("the client-final message needs c=, r= and p=")
        binding = _unb64(_attribute(parts[0], "c", "client-final"), "the channel binding")
        nonce = _attribute(parts[1], "r", "client-final")
        if any("=" not in p for p in parts[2:]):
            raise MalformedScram("the client-final message has a malformed extension")
        if binding != self.first.gs2_header.encode("utf-8"):
            raise ScramMismatch("the channel binding is not the GS2 header of client-first")
        # librdkafka before 2.6.1 (so kcat on Debian and Ubuntu) sends its own nonce once more
        # in front of the combined one (librdkafka#4895); Kafka 3.8.1..3.9 accepted it, and so
        # does the gateway: exactly that form, which still carries this exchange's server nonce.
        sent = nonce.encode("ascii", "replace")
        legacy = (self.first.nonce + self.nonce).encode("ascii")
        if not (
            hmac.compare_digest(sent, self.nonce.encode("ascii"))
            or hmac.compare_digest(sent, legacy)
        ):
            raise ScramMismatch("the nonce is not this exchange's")
        auth_message = f"{self.first.bare},{self.server_first.decode('ascii')},{head}"
        return f"{auth_message},p={proof_b64}".encode()

    def server_final(self, transcript: bytes, server_key: bytes) -> bytes:
        """``v=ServerSignature`` (RFC 5802 §3), once ``verify_transcript`` accepted the proof."""
        auth_message = transcript.rpartition(b",p=")[0]
        return b"v=" + _b64(_hmac(_hash(self.mechanism), server_key, auth_message)).encode()


def verify_transcript(mechanism: str, stored_key: bytes, transcript: bytes) -> bool:
    """Whether the client's proof in ``transcript`` shows it knows the password behind
    ``stored_key``: ClientKey = proof XOR HMAC(StoredKey, AuthMessage); H(ClientKey) =
    StoredKey."""
    name = _hash(mechanism)
    auth_message, sep, proof_b64 = transcript.rpartition(b",p=")
    if not sep:
        return False
    try:
        proof = base64.b64decode(proof_b64, validate=True)
    except binascii.Error:
        return False
    signature = _hmac(name, stored_key, auth_message)
    if len(proof) != len(signature):
        return False
    client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
    return hmac.compare_digest(hashlib.new(name, client_key).digest(), stored_key)


class ScramClient:
    """The client role (for a backend that logs in to a broker, and for tests)."""

    def __init__(
        self,
        mechanism: str,
        username: str,
        password: str,
        *,
        nonce: str,
        authzid: str = "",
        extensions: str = "",  # ",key=value..." after the nonce, as Kafka writes tokenauth
    ) -> None:
        self.mechanism = mechanism
        self._password = password
        self.gs2_header = f"n,{'a=' + escape_saslname(authzid) if authzid else ''},"
        self.bare = f"n={escape_saslname(username)},r={nonce}{extensions}"
        self._nonce = nonce
        self._expected_signature = b""

    def client_first(self) -> bytes:
        return f"{self.gs2_header}{self.bare}".encode()

    def client_final(self, server_first: bytes) -> bytes:
        name = _hash(self.mechanism)
        text = _decode(server_first, "server-first")
        parts = text.split(",")
        if len(parts) < 3:
            raise MalformedScram("the server-first message needs r=, s= and i=")
        nonce = _attribute(parts[0], "r", "server-first")
        salt = _unb64(_attribute(parts[1], "s", "server-first"), "the salt")
        try:
            iterations = int(_attribute(parts[2], "i", "server-first"))
        except ValueError:
            raise MalformedScram("the iteration count is not a number") from None
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise ScramMismatch("the server's nonce does not extend the client's")
        salted = salted_password(self.mechanism, self._password, salt, iterations)
        client_key = _hmac(name, salted, b"Client Key")
        head = f"c={_b64(self.gs2_header.encode())},r={nonce}"
        auth_message = f"{self.bare},{text},{head}".encode()
        signature = _hmac(name, hashlib.new(name, client_key).digest(), auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._expected_signature = _hmac(name, _hmac(name, salted, b"Server Key"), auth_message)
        return f"{head},p={_b64(proof)}".encode()

    def check_server_final(self, server_final: bytes) -> None:
        text = _decode(server_final, "server-final")
        signature = _unb64(_attribute(text, "v", "server-final"), "the server signature")
        if not hmac.compare_digest(signature, self._expected_signature):
            raise ScramMismatch("the server's signature is wrong")


__all__ = [
    "HASHES",
    "MAX_ITERATIONS",
    "MIN_ITERATIONS",
    "ClientFirst",
    "MalformedScram",
    "ScramClient",
    "ScramKeys",
    "ScramMismatch",
    "ScramServer",
    "derive_keys",
    "escape_saslname",
    "keys_from_salted_password",
    "parse_client_first",
    "salted_password",
    "verify_transcript",
]
