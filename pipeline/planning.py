"""What a read covers, asked of the backend on the driver: each topic's partitions, their first
and next offsets, and the options' starting and ending offsets resolved against them.

An offset the options name must lie inside what the partition holds (``log start ..
next offset``); one outside is an error naming the option, not a silently empty or shifted read.
"""

from __future__ import annotations

from gateway.model import (
    DescribeTopic,
    GatewayError,
    ListOffsets,
    NotFound,
    OffsetSpec,
)

from .endpoint import Endpoint
from .errors import OptionError, PipelineError
from .offsets import Offsets
from .options import EARLIEST, LATEST, OffsetChoice, ReadOptions


async def partition_count(endpoint: Endpoint, name: str) -> int:
    try:
        info = (
            await endpoint.backend.describe_topic(DescribeTopic(topic=endpoint.topic(name)))
        ).info
    except NotFound:
        raise OptionError(
            "topic",
            f"topic {name!r} does not exist in stream {endpoint.stream!r} at {endpoint.shown}",
        ) from None
    except GatewayError as exc:
        raise PipelineError(f"{endpoint.shown}: {exc.message}") from None
    return info.partition_count


async def _offset(
    endpoint: Endpoint, name: str, partition: int, spec: OffsetSpec, ts_us: int = 0
) -> int | None:
    command = ListOffsets(
        topic=endpoint.topic(name), partition=partition, spec=spec, timestamp_us=ts_us
    )
    try:
        return (await endpoint.backend.list_offsets(command)).offset
    except GatewayError as exc:
        raise PipelineError(
            f"{endpoint.shown}: topic {name!r} partition {partition}: {exc.message}"
        ) from None


async def log_bounds(endpoint: Endpoint, topics: tuple[str, ...]) -> tuple[Offsets, Offsets]:
    """Every partition's first offset and next offset (the end of what it holds)."""
    earliest: Offsets = {}
    latest: Offsets = {}
    for name in topics:
        earliest[name], latest[name] = {}, {}
        for p in range(await partition_count(endpoint, name)):
            earliest[name][p] = await _offset(endpoint, name, p, OffsetSpec.EARLIEST) or 0
            latest[name][p] = await _offset(endpoint, name, p, OffsetSpec.LATEST) or 0
    return earliest, latest


async def starting_offsets(
    endpoint: Endpoint, options: ReadOptions, earliest: Offsets, latest: Offsets
) -> Offsets:
    """Where reading begins: ``startingTimestamp`` when given (the first offset at or after it;
    the end where there is none), else ``startingOffsets``."""
    if options.starting_timestamp_ms is None:
        return resolve("startingOffsets", options.starting, earliest, latest)
    ts_us = options.starting_timestamp_ms * 1000
    out: Offsets = {}
    for t, parts in latest.items():
        out[t] = {}
        for p, end in parts.items():
            found = await _offset(endpoint, t, p, OffsetSpec.TIMESTAMP, ts_us)
            out[t][p] = end if found is None else found
    return out


def resolve(option: str, choice: OffsetChoice, earliest: Offsets, latest: Offsets) -> Offsets:
    """``choice`` for every partition; one the JSON does not name starts at the earliest or
    ends at the latest."""
    if choice == "earliest":
        return {t: dict(parts) for t, parts in earliest.items()}
    if choice == "latest":
        return {t: dict(parts) for t, parts in latest.items()}
    default = EARLIEST if option == "startingOffsets" else LATEST
    out: Offsets = {}
    for t, parts in latest.items():
        named = choice.get(t, {})
        unknown = sorted(set(named) - set(parts))
        if unknown:
            raise OptionError(
                option, f"topic {t!r} has partitions 0..{len(parts) - 1}, not {unknown}"
            )
        out[t] = {}
        for p, end in parts.items():
            wanted = named.get(p, default)
            start = earliest[t][p]
            if wanted == EARLIEST:
                out[t][p] = start
            elif wanted == LATEST:
                out[t][p] = end
            elif start <= wanted <= end:
                out[t][p] = wanted
            else:
                raise OptionError(
                    option,
                    f"topic {t!r} partition {p}: offset {wanted} is out of range "
                    f"(the partition holds offsets {start} to {end - 1}, next is {end})",
                )
    return out


def check_order(start: Offsets, end: Offsets) -> None:
    for t, parts in end.items():
        for p, e in parts.items():
            if e < start[t][p]:
                raise OptionError(
                    "endingOffsets",
                    f"topic {t!r} partition {p}: ends at {e}, before it starts ({start[t][p]})",
                )


__all__ = ["check_order", "log_bounds", "partition_count", "resolve", "starting_offsets"]
