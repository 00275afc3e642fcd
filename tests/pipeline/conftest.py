"""One SparkSession (master ``local[2]``) for every pipeline test: starting one costs 6-8 s,
each query after it 1-4 s (../shared/notes/pyspark.md). Its Python workers import ``pipeline``
and ``gateway`` from the project's editable install, and run this interpreter."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

import pipeline
from tests.helpers.rabbitmq_shared import stop_shared_rabbitmq


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # else the first non-loopback address
    os.environ["PYSPARK_PYTHON"] = sys.executable  # else PATH's python3, without pyarrow
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2]")
        .appName("streamgate-pipeline-tests")
        .config("spark.ui.enabled", "false")  # else it binds 0.0.0.0:4040
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    pipeline.register(session)
    yield session
    session.stop()


@pytest.fixture(scope="session", autouse=True)
def _shared_rabbitmq_stops() -> Iterator[None]:
    yield
    stop_shared_rabbitmq()  # by pid, if a test started it
