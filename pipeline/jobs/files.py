"""Small files next to Spark's own in a checkpoint directory, and Spark's offset log read back,
through Hadoop's FileSystem: a checkpoint may be on HDFS or S3 as well as on a local disk, and
Spark's JVM already knows how to reach it. py4j calls, on the driver only."""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import SparkSession

from ..errors import PipelineError
from ..offsets import Offsets, from_json

_UTF8 = "UTF-8"


class Files:
    def __init__(self, spark: SparkSession) -> None:
        context = spark.sparkContext
        self._jvm: Any = context._jvm
        self._conf: Any = context._jsc.hadoopConfiguration()

    def _path(self, path: str) -> tuple[Any, Any]:
        p = self._jvm.org.apache.hadoop.fs.Path(path)
        return p, p.getFileSystem(self._conf)

    def read(self, path: str) -> str | None:
        """The file's text; None when there is no such file."""
        p, fs = self._path(path)
        if not fs.exists(p):
            return None
        stream = fs.open(p)
        try:
            return str(self._jvm.org.apache.commons.io.IOUtils.toString(stream, _UTF8))
        finally:
            stream.close()

    def write(self, path: str, text: str) -> None:
        """Written whole, then renamed into place: a reader never sees half of it."""
        p, fs = self._path(path)
        tmp = self._jvm.org.apache.hadoop.fs.Path(f"{path}.tmp")
        out = fs.create(tmp, True)
        try:
            out.write(bytearray(text.encode()))
        finally:
            out.close()
        fs.delete(p, False)
        if not fs.rename(tmp, p):
            raise PipelineError(f"could not write {path}")

    def names(self, directory: str) -> list[str]:
        """The names in ``directory`` (none when it does not exist)."""
        p, fs = self._path(directory)
        if not fs.exists(p):
            return []
        return [str(status.getPath().getName()) for status in fs.listStatus(p)]


def committed_end(files: Files, checkpoint: str) -> tuple[int, Offsets] | None:
    """The last micro-batch the query committed and where it ended in its one source: Spark's
    offset log (``offsets/<batch>``: a version line, the batch's metadata, then one line per
    source) for the highest batch in ``commits/``. None before any batch committed."""
    batches = [int(n) for n in files.names(f"{checkpoint}/commits") if n.isdigit()]
    if not batches:
        return None
    batch = max(batches)
    text = files.read(f"{checkpoint}/offsets/{batch}")
    lines = [] if text is None else text.splitlines()
    try:
        if len(lines) != 3 or not lines[0].startswith("v"):
            raise ValueError(f"{len(lines)} lines")
        return batch, from_json(json.loads(lines[2]))
    except (ValueError, TypeError, AttributeError) as exc:
        raise PipelineError(
            f"{checkpoint}/offsets/{batch}: not the offset log of one streamgate source ({exc})"
        ) from None


__all__ = ["Files", "committed_end"]
