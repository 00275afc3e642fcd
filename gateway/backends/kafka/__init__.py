"""The Kafka backend: a real Kafka-compatible broker, spoken to with the client side of
``protocols.kafka``."""

from .backend import KafkaBackend, open_kafka

__all__ = ["KafkaBackend", "open_kafka"]
