"""What the gateway provides on top of backends: group coordination, producer ids, users."""

from .groups import GroupCoordinator
from .producer_ids import ProducerIds
from .users import UserStore

__all__ = ["GroupCoordinator", "ProducerIds", "UserStore"]
