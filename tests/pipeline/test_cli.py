"""``streamgate pipeline`` and ``streamgate bench spark`` are handed to ``python -m pipeline`` by
exec (the gateway never imports the pipeline), or refused in one line when the pipeline extra is
missing; the pipeline's own command line, without Spark."""

from __future__ import annotations

import importlib.util
import os
import zipfile
from pathlib import Path
from typing import Any, NoReturn

import pytest

import gateway.cli
from pipeline.cli import main, parser, reason
from pipeline.jobs.ship import LAUNCHER


class Exec(Exception):
    pass


def _no_exec(path: str, argv: list[str], env: dict[str, str]) -> NoReturn:
    raise Exec(argv, env)


@pytest.mark.parametrize(
    ("given", "handed"),
    [
        (["pipeline", "archive", "--topic", "t"], ["archive", "--topic", "t"]),
        (["pipeline", "--help"], ["--help"]),
        (["bench", "spark", "--messages", "10"], ["bench", "--messages", "10"]),
    ],
)
def test_handed_over_by_exec(
    monkeypatch: pytest.MonkeyPatch, given: list[str], handed: list[str]
) -> None:
    monkeypatch.setattr(os, "execve", _no_exec)
    with pytest.raises(Exec) as info:
        gateway.cli.main(given)
    argv, env = info.value.args
    assert argv[1:3] == ["-m", "pipeline"] and argv[3:] == handed
    assert env["PYTHONSAFEPATH"] == "1"


def test_without_the_pipeline_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name == "pyspark" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    monkeypatch.setattr(os, "execve", _no_exec)
    assert gateway.cli.main(["pipeline", "archive"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "streamgate: the Spark pipeline needs the pipeline extra (pip install "
        "'streamgate[pipeline]'); not installed: pyspark\n"
    )


def test_other_commands_stay(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "execve", _no_exec)
    with pytest.raises(SystemExit):
        gateway.cli.main(["bench", "embedded", "--bogus"])  # parsed here: not handed over


def test_options(capsys: pytest.CaptureFixture[str]) -> None:
    args = parser().parse_args(
        ["mirror", "--url", "kafka://h:1", "--to", "iggy://u:p@h:2", "--topic", "a,b",
         "--checkpoint", "ck", "--verify-only", "--conf", "spark.x=1=2"]
    )  # fmt: skip
    assert (args.url, args.to, args.topic, args.copy, args.verify) == (
        "kafka://h:1", "iggy://u:p@h:2", "a,b", False, True
    )  # fmt: skip
    assert args.conf == [("spark.x", "1=2")]
    with pytest.raises(SystemExit):
        parser().parse_args(["archive", "--topic", "t", "--output", "o",
                             "--max-offsets-per-trigger", "0"])  # fmt: skip
    assert "must be at least 1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parser().parse_args(["mirror", "--to", "x", "--topic", "t", "--checkpoint", "c",
                             "--no-verify", "--verify-only"])  # fmt: skip


def test_the_reason_inside_spark_errors() -> None:
    spark_text = (
        "[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: Traceback (most "
        'recent call last):\n  File "x.py", line 1\npipeline.errors.OptionError: option topic: '
        "topic 'nope' does not exist in stream 'default' at embedded:/d\n\tat org.apache..."
    )
    assert reason(Exception(spark_text)) == (
        "option topic: topic 'nope' does not exist in stream 'default' at embedded:/d"
    )
    assert reason(Exception("\n[SOMETHING] went wrong\nmore")) == "[SOMETHING] went wrong"


def test_package(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["package", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "streamgate_job.py").read_text() == LAUNCHER
    names = set(zipfile.ZipFile(tmp_path / "streamgate.zip").namelist())
    assert {"pipeline/cli.py", "gateway/backends/url.py", "protocols/__init__.py"} <= names
    assert not any("__pycache__" in n for n in names)
    assert "spark-submit --py-files" in capsys.readouterr().out


def test_report_is_a_job_of_the_dispatcher(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``streamgate pipeline report``: a missing access log is one line and exit 1, before
    Spark starts (the job itself: test_report.py)."""
    missing = tmp_path / "nope.jsonl"
    assert main(["report", "--input", str(missing), "--output", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and str(missing) in err, err
