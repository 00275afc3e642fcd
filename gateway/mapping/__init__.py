"""How each protocol's messages, names and settings map onto the canonical model (DESIGN.md §3):
pure functions shared by the protocol's translator (server role) and its backend (client role).
"""

__all__: list[str] = []
