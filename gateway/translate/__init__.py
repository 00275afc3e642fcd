"""Everything pure about each protocol: frames, messages, names, settings and both directions of
its error table <-> the canonical model, used by its listener (server role) and its backend
(client role)."""
