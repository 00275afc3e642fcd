"""RabbitMQ Stream <-> the canonical model: commands (``requests``), AMQP messages and the stored
``rabbitmq_stream`` wire form (``messages``), Deliver chunks (``chunks``) and the response codes
both ways (``errors``)."""

from . import chunks, errors, messages, requests

__all__ = ["chunks", "errors", "messages", "requests"]
