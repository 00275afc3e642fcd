"""The ``streamgate`` Spark data source: the entry point Spark instantiates with the user's
options, on the driver and in its Python workers, for each of the four directions."""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from .options import read_options, write_options
from .reader import BatchReader
from .rows import read_schema
from .stream_reader import StreamReader
from .writer import BatchWriter, StreamWriter


class StreamgateDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "streamgate"

    def schema(self) -> str:
        # Spark asks when a read is defined (``load()``): checking every option here makes a
        # mistake fail there, before any job runs. Batch and streaming reads have one schema.
        return read_schema(read_options(self.options, streaming=False).include_headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        return BatchReader(read_options(self.options, streaming=False), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return StreamReader(read_options(self.options, streaming=True), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return BatchWriter(write_options(self.options), schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return StreamWriter(write_options(self.options), schema)


__all__ = ["StreamgateDataSource"]
