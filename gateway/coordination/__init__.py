"""Group coordination and offset semantics for backends that lack them (Kafka groups next)."""
