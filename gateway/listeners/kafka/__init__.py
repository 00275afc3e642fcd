"""The Kafka listener: the broker side of the Kafka protocol for real clients (port 9092)."""

from .service import KafkaService, KafkaSettings

__all__ = ["KafkaService", "KafkaSettings"]
