"""The garbage collector of a serving gateway.

CPython collects its youngest generation every 700 container allocations and, every 100 of
those, walks every object the process holds: the modules, the configuration, the backend's
catalog, made once at start-up and never garbage. On the hot paths (a Publish, a Fetch, a
Deliver) that is several percent of the CPU. Once the gateway serves, ``settle`` moves what
start-up made out of the collector's way (``gc.freeze``: never collected, never walked) and
makes the youngest generation larger, so the frames of requests in flight die young without a
collection and a full collection walks only what was made since.
"""

from __future__ import annotations

import gc
from typing import Final

# (youngest, middle, oldest): a young collection every YOUNG container allocations; the ratios
# between the generations stay CPython's.
YOUNG: Final = 10_000
THRESHOLDS: Final = (YOUNG, 10, 10)


def settle() -> None:
    """Call once the gateway is serving (start-up objects made). Once a process: a process that
    serves again (tests start gateways in theirs) freezes nothing more."""
    if gc.get_freeze_count():
        return
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)


__all__ = ["THRESHOLDS", "settle"]
