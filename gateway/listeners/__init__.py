"""trio listeners: one package per protocol (sessions, handlers, auth) on the one connection
pump in ``connection``."""
