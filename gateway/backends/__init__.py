"""Backend implementations behind the one ``Backend`` protocol, one package each, selected by
URL (``gateway.backends.url``)."""

from .base import (
    Backend,
    BackendSettings,
    BackendUrlError,
    Capabilities,
    DataWaits,
    NativeGroupDeletion,
    NativeGroups,
    NativeProducerIds,
    NativePublisherDedup,
    RecordDeletion,
    SharedLogs,
    Transactions,
)

__all__ = [
    "Backend",
    "BackendSettings",
    "BackendUrlError",
    "Capabilities",
    "DataWaits",
    "NativeGroupDeletion",
    "NativeGroups",
    "NativeProducerIds",
    "NativePublisherDedup",
    "RecordDeletion",
    "SharedLogs",
    "Transactions",
]
