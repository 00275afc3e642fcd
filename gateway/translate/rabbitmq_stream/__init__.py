"""RabbitMQ Stream <-> the canonical model: commands and response codes (``requests``), AMQP
messages and the stored ``rabbitmq_stream`` wire form (``messages``), Deliver chunks
(``chunks``)."""

from . import chunks, messages, requests

__all__ = ["chunks", "messages", "requests"]
