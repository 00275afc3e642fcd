"""The RabbitMQ Stream backend: a real RabbitMQ (3.10+, stream plugin); a topic with N
partitions is N streams, and the catalog lives in a stream of its own."""

from .backend import RabbitStreamBackend, open_rabbitmq_stream

__all__ = ["RabbitStreamBackend", "open_rabbitmq_stream"]
