"""``archive`` on a real Spark standalone cluster (a master and a worker from pyspark's own
launcher, on loopback), not only ``local[*]``: once with ``spark-submit`` and the files ``streamgate
pipeline package`` writes, once with ``streamgate pipeline archive --master spark://...``, which
ships the project's code itself. The executors' Python has the dependencies but not this
project, so what they run came in the shipped zip."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pipeline.cli import main as pipeline_main
from tests.pipeline.data import fill
from tests.pipeline.jobs import SPARK_HOME, spark_env, standalone_cluster, start, streamgate
from tests.pipeline.spark_io import expected, positions

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

JOB_LIMIT_S = 150.0
EXECUTORS = ("--conf", "spark.executor.memory=512m", "--conf", "spark.cores.max=2")


def python_without_streamgate(directory: Path) -> Path:
    """A venv whose site-packages reaches this one's as a plain path entry: pyspark, pyarrow,
    trio... import, but the editable install of streamgate (a .pth hook that only runs in
    a site directory) does not."""
    subprocess.run(
        [getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip",
         str(directory)],
        check=True, timeout=60,
    )  # fmt: skip
    python = directory / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True, timeout=30,
    ).stdout.strip()  # fmt: skip
    (Path(site) / "streamgate-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    probe = "import pyarrow, pyspark, trio\ntry:\n import pipeline\nexcept ImportError: pass\n"
    probe += "else: raise SystemExit('pipeline importable')"
    subprocess.run([python, "-c", probe], check=True, timeout=30, cwd=directory)
    return python


def test_archive_on_a_standalone_cluster(spark: SparkSession, tmp_path: Path) -> None:
    store, out, package = tmp_path / "data", tmp_path / "archive", tmp_path / "package"
    fill(store, {"orders": [40, 30]})
    python = str(python_without_streamgate(tmp_path / "executor-python"))
    assert pipeline_main(["package", "--out", str(package)]) == 0
    archive = ("archive", "--url", f"embedded:{store}", "--topic", "orders", "--output", str(out))
    with standalone_cluster(tmp_path / "cluster") as master:
        submitted = start(
            [str(SPARK_HOME / "bin" / "spark-submit"), "--master", master, *EXECUTORS,
             "--conf", "spark.ui.enabled=false", "--conf", "spark.ui.showConsoleProgress=false",
             "--py-files", str(package / "streamgate.zip"), str(package / "streamgate_job.py"),
             *archive],
            tmp_path / "submit.log",
            spark_env(PYSPARK_PYTHON=python, PYSPARK_DRIVER_PYTHON=python),  # driver too
            tmp_path,
        )  # fmt: skip
        assert submitted.finish(JOB_LIMIT_S) == 0, submitted.text()[-6000:]
        assert "archive: 70 rows in 1 batches" in submitted.text()

        fill(store, {"orders": [5, 0]}, first=40, create=False)
        fill(store, {"orders": [0, 5]}, first=30, create=False)
        run = start(
            streamgate("pipeline", *archive, "--master", master, *EXECUTORS),
            tmp_path / "run.log",
            spark_env(PYSPARK_PYTHON=python),
            tmp_path,
        )
        assert run.finish(JOB_LIMIT_S) == 0, run.text()[-6000:]
        assert "archive: gateway, protocols and pipeline go to the executors as" in run.text()
        assert "archive: 10 rows in 1 batches" in run.text()
    # both ran on the cluster's worker: an executor each
    assert len(list((tmp_path / "cluster" / "work").glob("app-*"))) == 2
    table = spark.read.parquet(str(out))
    assert positions(table) == expected("orders", {0: range(45), 1: range(35)})
