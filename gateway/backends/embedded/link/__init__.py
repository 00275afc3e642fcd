"""The embedded store shared by ``--workers``: one owner process serves it, the workers reach it."""

from .client import SCHEME, EmbeddedLink
from .server import Clients, serve_store
from .wire import METHODS

__all__ = ["METHODS", "SCHEME", "Clients", "EmbeddedLink", "serve_store"]
