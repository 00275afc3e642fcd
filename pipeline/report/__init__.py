"""The ``report`` job: an access log's traffic and latency as Parquet, PNG charts and HTML."""

from .cli import add_arguments, main, run
from .inputs import InputError, access_log_files
from .job import Report, ReportRun, report

__all__ = [
    "InputError",
    "Report",
    "ReportRun",
    "access_log_files",
    "add_arguments",
    "main",
    "report",
    "run",
]
