"""Consumer offsets of the Kafka backend, at each group's coordinator.

The broker runs the groups (``groups``), so a member's commit goes with its generation and member
id and the broker refuses one from a stale generation or an unknown member, whichever gateway it
came through; a commit without them (Iggy's, RabbitMQ Stream's StoreOffset, a Kafka client's
standalone commit) is a standalone one: generation -1, no member id (kafka.md §1.2,
OffsetCommit). Offsets are the NEXT offset to read on both sides, as Kafka keeps them. Without
OffsetDelete (Tansu) an offset is deleted by committing -1, which OffsetFetch reports as "nothing
committed".
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from gateway.backends.kafka.cluster import OFFSET_COMMIT, OFFSET_DELETE, OFFSET_FETCH, Api, Cluster
from gateway.backends.kafka.groups import COORDINATOR_MOVED
from gateway.model import Unsupported
from gateway.translate.kafka.errors import gateway_error


class GroupOffsets:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    async def _request(
        self, group: str, name: str, partition: int, api: Api, values: dict[str, Any]
    ) -> Any:
        """``api`` for one partition of a known topic; the partition's answer."""
        await self.cluster.partition(name, partition)  # UnknownTopic, UnknownPartition
        conn = await self.cluster.coordinator(group)
        answer = await self.cluster.request(api, {"group_id": group, **values}, conn=conn)
        part = answer.topics[0].partitions[0] if answer.topics else None
        code = getattr(answer, "error_code", ErrorCode.none)  # OffsetFetch v2+, OffsetDelete
        if code is ErrorCode.none and part is not None:
            code = part.error_code
        if code in COORDINATOR_MOVED:
            self.cluster.forget_coordinator(group)
        if code is not ErrorCode.none:
            raise gateway_error(code, f"group {group!r}, {name}[{partition}]")
        return part

    async def commit(
        self,
        group: str,
        name: str,
        partition: int,
        offset: int,
        metadata: str = "",
        *,
        generation: int = -1,
        member_id: str = "",
        leader_epoch: int = -1,
    ) -> None:
        await self._request(
            group, name, partition, OFFSET_COMMIT,
            {"generation_id_or_member_epoch": generation, "member_id": member_id,
             "group_instance_id": None,
             "retention_time": -1,
             "topics": [{"name": name, "partitions": [
                 {"partition_index": partition, "committed_offset": offset,
                  "committed_leader_epoch": leader_epoch, "committed_metadata": metadata}]}]},
        )  # fmt: skip

    async def fetch(self, group: str, name: str, partition: int) -> tuple[int | None, str, int]:
        """The committed offset (None: none), its metadata and leader epoch (-1: none)."""
        part = await self._request(
            group, name, partition, OFFSET_FETCH,
            {"topics": [{"name": name, "partition_indexes": [partition]}],
             "require_stable": False},
        )  # fmt: skip
        if part.committed_offset < 0:
            return None, "", -1
        epoch = getattr(part, "committed_leader_epoch", -1)  # OffsetFetch v5+
        return part.committed_offset, part.metadata or "", epoch

    async def delete(self, group: str, name: str, partition: int) -> None:
        try:
            self.cluster.version(OFFSET_DELETE)
        except Unsupported:
            await self.commit(group, name, partition, -1)
            return
        await self._request(
            group, name, partition, OFFSET_DELETE,
            {"topics": [{"name": name, "partitions": [{"partition_index": partition}]}]},
        )  # fmt: skip


__all__ = ["GroupOffsets"]
