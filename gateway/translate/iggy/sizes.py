"""Iggy's text forms of sizes and durations, as a server reads them in option values (iggy.md
§5.4: "any key from ``options=``" travels as a String, so ``segment_size="128 MiB"`` reaches the
server as text). Sizes are ``IggyByteSize`` strings (the ``byte-unit`` crate: a number, an
optional space, then B, kB..EB in powers of 1000 or KiB..EiB in powers of 1024); durations are
``IggyDuration`` strings (the ``humantime`` crate: "1h 30m", "500ms", "1us"). Pure functions.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Final

U64_MAX: Final = (1 << 64) - 1

_SIZE_UNITS: Final = {
    "": 1, "b": 1,
    "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3, "gb": 1000**3,
    "t": 1000**4, "tb": 1000**4, "p": 1000**5, "pb": 1000**5, "e": 1000**6, "eb": 1000**6,
    "ki": 1 << 10, "kib": 1 << 10, "mi": 1 << 20, "mib": 1 << 20, "gi": 1 << 30, "gib": 1 << 30,
    "ti": 1 << 40, "tib": 1 << 40, "pi": 1 << 50, "pib": 1 << 50, "ei": 1 << 60, "eib": 1 << 60,
}  # fmt: skip
_SIZE: Final = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*")

# humantime's units, in µs (a month is 30.44 days and a year 365.25, as humantime counts them).
_DAY_US: Final = 86_400_000_000
_DURATION_UNITS: Final = {
    **dict.fromkeys(("nsec", "ns"), Decimal("0.001")),
    **dict.fromkeys(("usec", "us", "µs"), Decimal(1)),
    **dict.fromkeys(("msec", "ms"), Decimal(1000)),
    **dict.fromkeys(("seconds", "second", "sec", "s"), Decimal(1_000_000)),
    **dict.fromkeys(("minutes", "minute", "min", "m"), Decimal(60_000_000)),
    **dict.fromkeys(("hours", "hour", "hr", "h"), Decimal(3_600_000_000)),
    **dict.fromkeys(("days", "day", "d"), Decimal(_DAY_US)),
    **dict.fromkeys(("weeks", "week", "w"), Decimal(7 * _DAY_US)),
    **dict.fromkeys(("months", "month", "M"), Decimal(2_630_016_000_000)),
    **dict.fromkeys(("years", "year", "y"), Decimal(31_557_600_000_000)),
}
_DURATION_PART: Final = re.compile(r"\s*(\d+)\s*([a-zA-Zµ]+)")
# Words Iggy's expiry and max-size parsers take for their two special values.
_NEVER: Final = frozenset({"none", "never", "never_expire", "unlimited", "infinite"})
_SERVER_DEFAULT: Final = frozenset({"server_default", "default"})


def parse_size(text: str) -> int:
    """Bytes of an IggyByteSize string ("1048576", "128 MiB", "1.5GB"); ValueError otherwise."""
    match = _SIZE.fullmatch(text)
    unit = _SIZE_UNITS.get(match.group(2).lower()) if match else None
    if match is None or unit is None:
        raise ValueError(f"not a size: {text!r}")
    value = Decimal(match.group(1)) * unit
    if value > U64_MAX:
        raise ValueError(f"size out of range: {text!r}")
    return int(value)


def parse_max_size(text: str) -> int:
    """A max topic size: bytes, 0 = the server's default, u64::MAX = unlimited (§5.4)."""
    word = text.strip().lower()
    if word in _NEVER:
        return U64_MAX
    if word in _SERVER_DEFAULT:
        return 0
    return parse_size(text)


def parse_expiry_us(text: str) -> int:
    """A message expiry in µs: a number is µs as on the wire (§5.4), else a humantime
    duration; 0 = the server's default, u64::MAX = never."""
    word = text.strip()
    if word.isdigit():
        return _in_u64(int(word), text)
    if word.lower() in _NEVER:
        return U64_MAX
    if word.lower() in _SERVER_DEFAULT:
        return 0
    total, pos = Decimal(0), 0
    for part in _DURATION_PART.finditer(word):
        if part.start() != pos:
            break
        unit = _DURATION_UNITS.get(part.group(2)) or _DURATION_UNITS.get(part.group(2).lower())
        if unit is None:
            raise ValueError(f"unknown duration unit in {text!r}")
        total += int(part.group(1)) * unit
        pos = part.end()
    if pos == 0 or word[pos:].strip():
        raise ValueError(f"not a duration: {text!r}")
    try:
        return _in_u64(int(total), text)
    except InvalidOperation:
        raise ValueError(f"not a duration: {text!r}") from None


def _in_u64(value: int, text: str) -> int:
    if value > U64_MAX:
        raise ValueError(f"out of range: {text!r}")
    return value


__all__ = ["U64_MAX", "parse_expiry_us", "parse_max_size", "parse_size"]
