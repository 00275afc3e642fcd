"""What the gateway provides on top of backends: group coordination, producer ids, users."""

from gateway.model.permissions import Permissions
from gateway.model.users import User, UserStatus, allowed

from .assigned_groups import AssignedGroup, AssignedGroups
from .groups import GroupCoordinator
from .producer_ids import ProducerIds
from .users import UserStore

__all__ = [
    "AssignedGroup",
    "AssignedGroups",
    "GroupCoordinator",
    "Permissions",
    "ProducerIds",
    "User",
    "UserStatus",
    "UserStore",
    "allowed",
]
