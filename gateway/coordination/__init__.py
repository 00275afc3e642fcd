"""What the gateway provides on top of backends: group coordination, producer ids, users."""

from gateway.model.permissions import Permissions
from gateway.model.users import User, UserStatus, allowed

from .assigned_groups import AssignedGroup, AssignedGroups
from .group_definitions import GroupDefinitions
from .groups import GroupCoordinator
from .producer_ids import ProducerIds
from .shared_groups import SharedGroups
from .users import UserStore

# Who runs consumer groups where the broker does not: this gateway alone, or every gateway on
# the backend together (the same methods, structurally ``backends.NativeGroups``).
Groups = GroupCoordinator | SharedGroups

__all__ = [
    "AssignedGroup",
    "AssignedGroups",
    "GroupCoordinator",
    "GroupDefinitions",
    "Groups",
    "Permissions",
    "ProducerIds",
    "SharedGroups",
    "User",
    "UserStatus",
    "UserStore",
    "allowed",
]
