"""trio listeners: sockets <-> codecs, sessions, limits; one module per protocol."""
