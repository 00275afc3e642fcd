"""Writes the dashboards' JSON where Grafana's provisioning picks it up (``provisioning/
dashboards/streamgate/``), from the Python that describes them; ``--check`` only compares.

    python -m grafana.generate          # after changing a dashboard: then commit the JSON
    python -m grafana.generate --check  # exit 1 when the committed JSON is not the generator's
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from grafana_foundation_sdk.builders.dashboard import Dashboard
from grafana_foundation_sdk.cog.encoder import JSONEncoder

from grafana import backend, overview, per_protocol

HERE = Path(__file__).resolve().parent
OUT = HERE / "provisioning" / "dashboards" / "streamgate"
DASHBOARDS: dict[str, Callable[[], Dashboard]] = {
    "streamgate-overview.json": overview.dashboard,
    "streamgate-protocol.json": per_protocol.dashboard,
    "streamgate-backend.json": backend.dashboard,
}


def render(build: Callable[[], Dashboard]) -> str:
    return json.dumps(build().build(), cls=JSONEncoder, indent=2, sort_keys=True) + "\n"


def rendered() -> dict[str, str]:
    """File name -> the JSON the generator writes there."""
    return {name: render(build) for name, build in DASHBOARDS.items()}


def stale(out: Path = OUT) -> list[str]:
    """The dashboard files missing from ``out``, differing from the generator's, or left over."""
    wanted = rendered()
    found = {p.name for p in out.glob("*.json")} if out.is_dir() else set()
    differ = [
        name
        for name, text in wanted.items()
        if name not in found or (out / name).read_text(encoding="utf-8") != text
    ]
    return sorted(differ + [name for name in found if name not in wanted])


def write(out: Path = OUT) -> list[str]:
    out.mkdir(parents=True, exist_ok=True)
    wanted = rendered()
    for name, text in wanted.items():
        (out / name).write_text(text, encoding="utf-8")
    for extra in out.glob("*.json"):
        if extra.name not in wanted:
            extra.unlink()
    return sorted(wanted)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grafana.generate", description=__doc__)
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 if stale")
    args = parser.parse_args(argv)
    if args.check:
        differ = stale()
        for name in differ:
            print(f"{OUT / name}: not what grafana/generate.py writes", file=sys.stderr)
        return 1 if differ else 0
    for name in write():
        print(OUT / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
