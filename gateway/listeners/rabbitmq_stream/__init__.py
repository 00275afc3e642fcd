"""The RabbitMQ Stream listener: the broker side of the stream protocol (port 5552)."""

from .service import RabbitStreamService
from .session import RabbitStreamSettings

__all__ = ["RabbitStreamService", "RabbitStreamSettings"]
