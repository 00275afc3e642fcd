"""What the gateway provides on top of backends: group coordination, producer ids, users."""

from .assigned_groups import AssignedGroup, AssignedGroups
from .groups import GroupCoordinator
from .permissions import Permissions
from .producer_ids import ProducerIds
from .user_records import User, UserStatus, allowed
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
