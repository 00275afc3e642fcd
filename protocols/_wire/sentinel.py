"""Sentinels ``next_frame()`` returns: ``NEED_DATA`` (no complete frame buffered yet) and
``CONNECTION_CLOSED`` (the peer closed cleanly between frames; nothing is owed either way).

Two enums of one member each, so that ``if x is NEED_DATA`` narrows the type for mypy.
"""

from __future__ import annotations

import enum
from typing import Literal, TypeAlias


class _Sentinel(enum.Enum):
    NEED_DATA = "NEED_DATA"

    def __repr__(self) -> str:
        return self.value


class _Closed(enum.Enum):
    CONNECTION_CLOSED = "CONNECTION_CLOSED"

    def __repr__(self) -> str:
        return self.value


NEED_DATA = _Sentinel.NEED_DATA
NeedData: TypeAlias = Literal[_Sentinel.NEED_DATA]
CONNECTION_CLOSED = _Closed.CONNECTION_CLOSED
ConnectionClosed: TypeAlias = Literal[_Closed.CONNECTION_CLOSED]
