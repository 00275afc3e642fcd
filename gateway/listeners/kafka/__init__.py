"""The Kafka listener: the broker side of the Kafka protocol for real clients (port 9092)."""

from .service import KafkaService
from .session import KafkaSettings

__all__ = ["KafkaService", "KafkaSettings"]
