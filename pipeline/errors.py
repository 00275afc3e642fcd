"""The data source's own failures. Spark wraps what a data source raises in its own error (a
``PythonException`` or ``AnalysisException`` with a JVM trace after it), but keeps the text: so
every message here names the option or the endpoint it is about and stands on its own."""

from __future__ import annotations


class PipelineError(Exception):
    """A read or write that cannot go on; the message is fit to show the user."""


class OptionError(PipelineError, ValueError):
    """An option that is missing or malformed, or names something that does not exist."""

    def __init__(self, option: str, message: str) -> None:
        self.option = option
        super().__init__(f"option {option}: {message}")


__all__ = ["OptionError", "PipelineError"]
