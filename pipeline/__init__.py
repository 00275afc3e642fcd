"""The data pipeline on Spark: ``register(spark)`` makes ``format("streamgate")`` known."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import OptionError, PipelineError
from .source import StreamgateDataSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def register(spark: SparkSession) -> None:
    """Once per session, on the driver: Spark keeps data sources per session, and its Python
    workers import this package (installed, or shipped with ``--py-files``) to run them."""
    spark.dataSource.register(StreamgateDataSource)


__all__ = ["OptionError", "PipelineError", "StreamgateDataSource", "register"]
