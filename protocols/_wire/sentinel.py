"""``NEED_DATA``: what ``next_frame()`` returns when no complete frame is buffered."""

from __future__ import annotations

import enum
from typing import Literal, TypeAlias


class _Sentinel(enum.Enum):
    NEED_DATA = "NEED_DATA"

    def __repr__(self) -> str:
        return self.value


NEED_DATA = _Sentinel.NEED_DATA
NeedData: TypeAlias = Literal[_Sentinel.NEED_DATA]
