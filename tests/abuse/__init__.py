"""Issue 18: fuzz and abuse of every listener (the live flood) and of every server codec."""
