"""The API versions the gateway serves and advertises (kafka.md §1.3, validated with all four
clients through a rewriting proxy; the set is ``vectors/kafka/advertised-versions.json``).

Every API is capped at its last non-flexible version, with five exceptions: ApiVersions v3/v4;
InitProducerId v2-v4 (v2 is v1 in the flexible encoding, KIP-482; v3 adds the ProducerId and
ProducerEpoch request fields of KIP-360; v4 only changes which error a fenced transactional
producer gets, KIP-588), for clients that recover an idempotent producer through it;
ListOffsets v4-v7 (v4 the leader epoch, v6 the flexible encoding, v7 the max-timestamp lookup of
KIP-734, which the librdkafka and kafka-python admin clients send at v7); and ListGroups v3-v4
(v3 flexible, v4 the states filter and each group's state, KIP-518, which admin clients show);
and AlterPartitionReassignments / ListPartitionReassignments v0 (KIP-455) and
DescribeUserScramCredentials / AlterUserScramCredentials v0 (KIP-554), which exist only in the
flexible encoding. The admin APIs DeleteRecords 0-1, AlterConfigs 0-1, DescribeConfigs 1-3
(v3 adds config_type and documentation, KIP-569; v4 is flexible), AlterReplicaLogDirs 1 and
DescribeLogDirs 1 (kio has no v0 of either; v1 is v0's layout), DeleteGroups 0-1, ElectLeaders
0-1 (v1 the election type and a top-level error, KIP-460) and IncrementalAlterConfigs 0 are
non-flexible; so are DescribeAcls, CreateAcls and DeleteAcls 1 (KIP-140/290; kio has no v0,
librdkafka sends 0-2 and kafka-python 1-3, so both settle on v1); and the transaction APIs
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and TxnOffsetCommit 0-2 (KIP-98; v2 of the first
three answers PRODUCER_FENCED, KIP-588; v3 is flexible; WriteTxnMarkers, 27, is between brokers
and not served), advertised only where the backend keeps transactions. Flexible versions are encoded
by kio, which writes no tagged field it has no value for: we never write one (librdkafka < 2.2
mis-skips them, §1.4 trap 2). Keys 68, 69, 71 and 72 are never advertised: librdkafka changes
behaviour as soon as they appear (§1.2).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final


class ApiKey(enum.IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51


# Advertised (min, max). Produce 0-2 are advertised but refused: old librdkafka (kcat) only
# compresses when Produce 0 is in range (§1.4 trap 1), as Kafka 4 still advertises them.
ADVERTISED: Final[Mapping[int, tuple[int, int]]] = MappingProxyType(
    {
        ApiKey.PRODUCE: (0, 7),
        ApiKey.FETCH: (4, 11),
        ApiKey.LIST_OFFSETS: (1, 7),
        ApiKey.METADATA: (1, 5),
        ApiKey.OFFSET_COMMIT: (2, 7),
        ApiKey.OFFSET_FETCH: (1, 5),
        ApiKey.FIND_COORDINATOR: (0, 2),
        ApiKey.JOIN_GROUP: (0, 5),
        ApiKey.HEARTBEAT: (0, 3),
        ApiKey.LEAVE_GROUP: (0, 1),
        ApiKey.SYNC_GROUP: (0, 3),
        ApiKey.DESCRIBE_GROUPS: (0, 4),
        ApiKey.LIST_GROUPS: (0, 4),
        ApiKey.SASL_HANDSHAKE: (0, 1),
        ApiKey.API_VERSIONS: (0, 4),
        ApiKey.CREATE_TOPICS: (2, 4),
        ApiKey.DELETE_TOPICS: (1, 3),
        ApiKey.DELETE_RECORDS: (0, 1),
        ApiKey.INIT_PRODUCER_ID: (0, 4),
        ApiKey.ADD_PARTITIONS_TO_TXN: (0, 2),
        ApiKey.ADD_OFFSETS_TO_TXN: (0, 2),
        ApiKey.END_TXN: (0, 2),
        ApiKey.TXN_OFFSET_COMMIT: (0, 2),
        ApiKey.DESCRIBE_ACLS: (1, 1),
        ApiKey.CREATE_ACLS: (1, 1),
        ApiKey.DELETE_ACLS: (1, 1),
        ApiKey.DESCRIBE_CONFIGS: (1, 3),
        ApiKey.ALTER_CONFIGS: (0, 1),
        ApiKey.ALTER_REPLICA_LOG_DIRS: (1, 1),
        ApiKey.DESCRIBE_LOG_DIRS: (1, 1),
        ApiKey.SASL_AUTHENTICATE: (0, 1),
        ApiKey.CREATE_PARTITIONS: (0, 1),
        ApiKey.DELETE_GROUPS: (0, 1),
        ApiKey.ELECT_LEADERS: (0, 1),
        ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 0),
        ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
        ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    }
)

SASL_KEYS: Final = frozenset({ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})

# Versions that are advertised but answered by closing the connection (no kio schema, no
# magic v0/v1 messages; no client in kafka.md §1.1 sends them).
REFUSED: Final[Mapping[int, frozenset[int]]] = MappingProxyType(
    {ApiKey.PRODUCE: frozenset({0, 1, 2})}
)


def api_name(api_key: int) -> str | None:
    """``produce``, ``fetch``, ... for the keys we serve; None for any other key."""
    try:
        return ApiKey(api_key).name.lower()
    except ValueError:
        return None


def advertised(*, sasl: bool) -> dict[int, tuple[int, int]]:
    """The ApiVersions answer of a listener: SASL keys only on SASL listeners (kafka.md §1.2)."""
    return {k: v for k, v in ADVERTISED.items() if sasl or k not in SASL_KEYS}


__all__ = ["ADVERTISED", "REFUSED", "SASL_KEYS", "ApiKey", "advertised", "api_name"]
