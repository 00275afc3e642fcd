"""The Iggy backend: a real Iggy server (current framing), through a pool of connections."""

from .backend import IggyBackend

__all__ = ["IggyBackend"]
