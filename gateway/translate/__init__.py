"""Pure translation between each protocol's frames and the canonical commands and results."""
