"""Backend URLs with their secrets masked, for the status page, logs and anything else shown.

A backend URL carries credentials in its user info (``rabbitmq-stream://guest:guest@host``,
``iggy://user:password@host``, ``kafka://user:password@host:9092``) and, for Iggy, as a
personal access token alone (``iggy://<token>@host``: backends.iggy.parse_url). A user info
without a password is therefore masked whole: it may be a token. Query options whose name
says secret (``password``, ``sasl_password``, ``token``, ``api_key``...) are masked too, so an
option added later does not leak by default.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final
from urllib.parse import unquote

MASK: Final = "***"
# Substrings of a query option's name that make its value a secret.
SECRET_OPTION_WORDS: Final = ("pass", "secret", "token", "key", "credential", "auth", "sig")


def _split(url: str) -> tuple[str, str | None, str, str, str]:
    """``scheme://userinfo@hosts/path?query#fragment`` -> (``scheme://``, userinfo, hosts, path,
    ``?query#fragment``), by hand: urlsplit refuses some authorities (an unbalanced ``[``) and
    ends the user info at a raw ``/``, ``?`` or ``#`` in a password. Here the user info runs to
    the last ``@`` of the URL, so such a password is masked whole (an ``@`` in a path or query,
    which no backend URL has, would mask more than needed, never less)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return "", None, "", url, ""  # embedded:./data: no authority
    userinfo, at, rest = rest.rpartition("@")
    end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    hosts, tail = rest[:end], rest[end:]
    path_end = min((i for i in (tail.find(c) for c in "?#") if i >= 0), default=len(tail))
    return scheme + sep, userinfo if at else None, hosts, tail[:path_end], tail[path_end:]


def _secret_option(name: str) -> bool:
    lowered = unquote(name).lower()
    return any(word in lowered for word in SECRET_OPTION_WORDS)


@dataclass(frozen=True, slots=True)
class MaskedUrl:
    """``shown``: the URL with every secret replaced by ``***``; ``secrets``: what was taken out
    (raw and percent-decoded), for ``redact`` to take out of any other text."""

    shown: str
    secrets: tuple[str, ...]

    def redact(self, text: str) -> str:
        # Longest first: a secret that contains another is replaced whole.
        for secret in sorted(self.secrets, key=len, reverse=True):
            text = text.replace(secret, MASK)
        return text


def mask_url(url: str) -> MaskedUrl:
    secrets: list[str] = []
    prefix, userinfo, hosts, path, rest = _split(url)
    if userinfo is not None:
        user, colon, password = userinfo.partition(":")
        if colon:
            secrets.append(password)
            userinfo = f"{user}:{MASK}"
        else:
            secrets.append(user)
            userinfo = MASK
        hosts = f"{userinfo}@{hosts}"
    query, hash_, fragment = rest.partition("#")
    if query.startswith("?"):
        options = []
        for option in query[1:].split("&"):
            name, eq, value = option.partition("=")
            if eq and _secret_option(name):
                secrets.append(value)
                option = f"{name}={MASK}"
            options.append(option)
        query = "?" + "&".join(options)
    if fragment:
        # Nothing reads a fragment; it is hidden rather than guessed at.
        secrets.append(fragment)
        fragment = MASK
    shown = f"{prefix}{hosts}{path}{query}{hash_}{fragment}"
    taken = {s for raw in secrets if raw for s in (raw, unquote(raw)) if s}
    return MaskedUrl(shown, tuple(sorted(taken)))


__all__ = ["MASK", "MaskedUrl", "mask_url"]
