"""The one way mappings report a field they could not carry (DESIGN.md §3): ``lossy(field)``,
which listeners count in ``streamgate_translation_lossy_total{from,to,field}``. Field names are
a small fixed set: value, key, headers, timestamp, id, properties, annotations, footer..."""

from __future__ import annotations

from collections.abc import Callable

Lossy = Callable[[str], None]  # called with the name of a field that could not be carried


def ignore_lossy(field: str) -> None:
    """For callers that do not count (backends storing, tests)."""
