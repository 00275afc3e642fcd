"""A directory's state, to prove that a refused opener wrote nothing there."""

from __future__ import annotations

from pathlib import Path


def listing(root: Path) -> dict[str, tuple[int, int, bytes | None]]:
    """Every entry under ``root``: size, mtime and, for files, the content."""
    found: dict[str, tuple[int, int, bytes | None]] = {}
    for path in [root, *root.rglob("*")]:
        st = path.stat()
        content = path.read_bytes() if path.is_file() else None
        found[str(path.relative_to(root))] = (st.st_size, st.st_mtime_ns, content)
    return found
