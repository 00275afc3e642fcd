"""The SparkSession a job runs in.

* Launched by ``spark-submit``: the session it set up (master, confs, ``--py-files``).
* Otherwise: ``--master`` (default ``local[*]``) and ``--conf`` pairs. A local master gets the
  settings of ../shared/notes/pyspark.md: loopback addresses, no UI on 0.0.0.0:4040, and this
  interpreter for the Python workers (PATH's ``python3`` may lack pyarrow).
* On a master that is not local, and not through spark-submit (whose ``--py-files`` ship what
  it runs), this project's code goes to the executors as a zip (``ship``) unless told not to.
  The executors' Python is ``PYSPARK_PYTHON``, which must have the dependencies.

Spark 4.3 hands ``addPyFile``/``--py-files`` zips to the Python workers of tasks and of batch
planning, but not to the driver-side process that runs a streaming source
(``python_streaming_source_runner``): that one only sees ``PYTHONPATH``, from the JVM's
environment or ``spark.executorEnv.PYTHONPATH``. So a zip the code comes from (the shipped
one, or the one spark-submit's driver imported ``pipeline`` from) goes there too, as a path on
the driver; on the executors that path means nothing, and the zip reaches them as an include.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

import pipeline

from .ship import PACKAGES, temporary_zip

LOCAL: Final = "local[*]"
WORKER_PATH: Final = "spark.executorEnv.PYTHONPATH"
_LOCAL_CONF: Final = (
    ("spark.ui.enabled", "false"),
    ("spark.driver.bindAddress", "127.0.0.1"),
    ("spark.driver.host", "127.0.0.1"),
)
_QUIET: Final = (("spark.ui.showConsoleProgress", "false"),)  # no "[Stage n:>" in our output


@dataclass(frozen=True, slots=True)
class SessionSettings:
    master: str | None = None  # None: spark-submit's, else LOCAL
    conf: Sequence[tuple[str, str]] = field(default_factory=tuple)
    ship: bool = True
    log_level: str = "ERROR"


def _pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"want KEY=VALUE, not {text!r}")
    return key, value


def spark_arguments(p: argparse.ArgumentParser, *, ship: bool = True) -> None:
    """--master, --conf, --log-level (and, for a job whose executors run this project's code,
    --no-ship): every job's Spark options."""
    p.add_argument(
        "--master",
        default=None,
        help=f"Spark master: {LOCAL} (the default, unless run by spark-submit), local[N], "
        "spark://host:7077, yarn...",
    )
    p.add_argument(
        "--conf",
        type=_pair,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting, as spark-submit's --conf (repeatable)",
    )
    if ship:
        p.add_argument(
            "--no-ship",
            dest="ship",
            action="store_false",
            help="do not send this project's code to a cluster's executors (they have it "
            "installed)",
        )
    p.add_argument(
        "--log-level", default="ERROR", help="Spark's log level after start (default ERROR)"
    )


def launched_by_spark_submit() -> bool:
    """``spark-submit app.py`` starts the JVM first and hands the Python driver its port."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def zip_of(file: str | None) -> str | None:
    """The zip a module was imported from (``.../streamgate.zip/pipeline/__init__.py``)."""
    parts = Path(file or "").parts
    for i, part in enumerate(parts):
        if part.lower().endswith(".zip"):
            return str(Path(*parts[: i + 1]))
    return None


def _submitted_conf(key: str) -> str | None:
    """A setting spark-submit gave the JVM (which runs already: no launch happens here)."""
    SparkContext._ensure_initialized()
    return SparkConf().get(key)


def job_session(app: str, settings: SessionSettings) -> tuple[SparkSession, Path | None]:
    """The session, and the zip shipped to the executors (None: nothing shipped)."""
    submitted = launched_by_spark_submit()
    master = settings.master or (None if submitted else LOCAL)
    local = master is not None and master.startswith("local")
    builder = SparkSession.builder.appName(app)
    if master is not None:
        builder = builder.master(master)
    given = dict(settings.conf)
    defaults = (*_LOCAL_CONF, *_QUIET) if local else _QUIET
    if local:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    for key, value in [*((k, v) for k, v in defaults if k not in given), *given.items()]:
        builder = builder.config(key, value)
    shipped = temporary_zip() if settings.ship and not local and not submitted else None
    zips = [str(shipped)] if shipped is not None else []
    zips += sorted({z for p in PACKAGES if (z := zip_of(p.__file__)) is not None})
    if zips:
        before = given.get(WORKER_PATH) or (_submitted_conf(WORKER_PATH) if submitted else None)
        builder = builder.config(WORKER_PATH, os.pathsep.join([*zips, *filter(None, [before])]))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(settings.log_level)
    if shipped is not None:
        spark.sparkContext.addPyFile(str(shipped))
    # After addPyFile: the registered source carries the includes known when it is registered
    # (pyspark's _wrap_function), and its Python workers import pipeline from them.
    pipeline.register(spark)
    return spark, shipped


__all__ = [
    "LOCAL",
    "SessionSettings",
    "job_session",
    "launched_by_spark_submit",
    "spark_arguments",
    "zip_of",
]
