"""Client subcommands (``topics``, ``produce``, ``consume``) on any endpoint, via the backends."""

from .commands import add_client_commands, run_client

__all__ = ["add_client_commands", "run_client"]
