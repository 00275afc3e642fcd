"""Real-client tests of the Iggy listener (apache-iggy 0.9.0, VSR framing)."""
