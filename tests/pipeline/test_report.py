"""``report``: the access log's aggregates, charts and page. Checked against a log written by
hand (bad lines, rotated and per-worker files, minute edges, a session in another time zone) and
against the log of a real gateway that real clients used, stopped by SIGTERM; the inputs'
errors without Spark; and the job launched by ``spark-submit``."""

from __future__ import annotations

import json
import math
import sys
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from PIL import Image
from pyspark.sql import SparkSession

from gateway.access_log import worker_path
from pipeline.report import InputError, access_log_files, main
from pipeline.report.aggregate import FIELDS, MEASURES, PERCENTILES
from pipeline.report.charts import CHARTS
from pipeline.report.inputs import spark_paths
from tests.gateway.test_access_log import KEYS
from tests.helpers.gateways import running_gateway
from tests.pipeline.data import create
from tests.pipeline.jobs import SPARK_HOME, spark_env, start
from tests.pipeline.threads import held

pytestmark = pytest.mark.timeout(120)

Line = dict[str, Any]
T0 = datetime(2026, 1, 31, 12, 0, tzinfo=UTC)
PNG = b"\x89PNG\r\n\x1a\n"


def line(at: datetime, protocol: str, command: str, **fields: Any) -> Line:
    out: Line = dict.fromkeys(KEYS)
    out.update(time=at.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), protocol=protocol, command=command,
               outcome="error" if fields.get("error_type") else "ok", **fields)  # fmt: skip
    assert list(out) == KEYS
    return out


def write(path: Path, lines: Sequence[Line | str]) -> None:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))


# --- what the aggregates must hold, computed here from the lines --------------------------------


def nearest_rank(values: Sequence[float], p: int) -> float | None:
    """The smallest value with at least p % of the values at or below it (a value that
    occurred): what percentile_approx gives while a group is small."""
    ordered = sorted(values)
    return ordered[math.ceil(p / 100 * len(ordered)) - 1] if ordered else None


def _total(values: list[int | None]) -> int | None:
    given = [v for v in values if v is not None]
    return sum(given) if given else None


def expected_minutes(lines: Sequence[Line]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, str, str, datetime], list[Line]] = defaultdict(list)
    for g in lines:
        at = datetime.strptime(g["time"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
        minute = at.replace(second=0, microsecond=0)
        groups[(g["protocol"], g["command"], g["outcome"], minute)].append(g)
    out = []
    for (protocol, command, outcome, minute), group in groups.items():
        durations = [g["duration_s"] for g in group if g["duration_s"] is not None]
        backends = [g["backend_s"] for g in group if g["backend_s"] is not None]
        row: dict[str, Any] = {"protocol": protocol, "command": command, "outcome": outcome,
                               "minute": minute, "count": len(group),
                               "messages": _total([g["messages"] for g in group]),
                               "bytes": _total([g["bytes"] for g in group]),
                               "duration_max_s": max(durations, default=None)}  # fmt: skip
        for p in PERCENTILES:
            row[f"duration_p{p}_s"] = nearest_rank(durations, p)
            row[f"backend_p{p}_s"] = nearest_rank(backends, p)
        out.append(row)
    return sorted(out, key=lambda r: (r["minute"], r["protocol"], r["command"], r["outcome"]))


def table(path: Path) -> list[dict[str, Any]]:
    return pq.read_table(path).to_pylist()  # type: ignore[no-any-return]


def check_outputs(out: Path) -> str:
    """Every chart a real PNG of some substance, and the page naming each; the page's text."""
    page = (out / "index.html").read_text()
    for chart in CHARTS:
        png = out / chart.file
        assert png.read_bytes()[:8] == PNG
        assert png.stat().st_size > 5000, chart.file
        with Image.open(png) as image:
            assert image.size == (1000, 420)
            image.verify()
        assert f'<img src="{chart.file}"' in page
    for name in ("by_minute", "summary", "errors"):
        assert f'href="{name}.parquet"' in page
    return page


# --- inputs -------------------------------------------------------------------------------------


def test_an_access_log_path_brings_its_rotated_and_worker_files(tmp_path: Path) -> None:
    path = tmp_path / "access.jsonl"
    workers = [Path(worker_path(str(path), i)) for i in (0, 1)]
    files = [path, Path(f"{path}.1"), Path(f"{path}.2"), *workers, Path(f"{workers[1]}.1")]
    for f in [*files, tmp_path / "access.jsonl.bak", tmp_path / "other.jsonl"]:
        f.write_text("{}\n")
    assert access_log_files([str(path)]) == [str(f) for f in files]
    # a worker's file alone (the supervisor writes none of its own), and a glob as it is
    for f in files[:3]:
        f.unlink()
    assert access_log_files([str(path)]) == [str(f) for f in files[3:]]
    assert access_log_files([str(tmp_path / "*.bak"), str(workers[0])]) == [
        str(tmp_path / "access.jsonl.bak"), str(workers[0])
    ]  # fmt: skip
    # another filesystem's URI goes to Spark untouched; a local name is escaped for Hadoop
    assert access_log_files(["hdfs://nn/logs/access*"]) == ["hdfs://nn/logs/access*"]
    assert spark_paths(["/a/b[1]/c{2}*", "s3a://b/k[1]"]) == [
        "/a/b\\[1\\]/c\\{2\\}\\*",
        "s3a://b/k[1]",
    ]


def test_an_input_that_is_missing_or_unreadable_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "dangling.jsonl").symlink_to(tmp_path / "gone")
    (tmp_path / "file").write_text("")
    cases = {
        str(tmp_path / "none.jsonl"): f"no such file: {tmp_path / 'none.jsonl'}",
        str(tmp_path / "logs" / "*.jsonl"): f"no file matches {tmp_path / 'logs' / '*.jsonl'}",
        str(tmp_path):
            f"cannot read {tmp_path}: is a directory (give the log's path, or a glob)",
        str(tmp_path / "dangling.jsonl"):
            f"cannot read {tmp_path / 'dangling.jsonl'}: No such file or directory",
    }  # fmt: skip
    for given, why in cases.items():
        with pytest.raises(InputError) as raised:
            access_log_files([given])
        assert str(raised.value) == why
        assert main(["--input", given, "--output", str(tmp_path / "out")]) == 1
        assert capsys.readouterr().err == f"streamgate pipeline report: {why}\n"
    assert not (tmp_path / "out").exists()  # failed before anything was made
    assert main(["--input", str(tmp_path / "file"), "--output", str(tmp_path / "file")]) == 1
    assert capsys.readouterr().err.startswith("streamgate pipeline report: cannot create ")


# --- a log written by hand ----------------------------------------------------------------------


@pytest.fixture
def new_york(spark: SparkSession) -> Iterator[None]:
    """Minutes and timestamps must come out in UTC whatever the session's zone."""
    before = spark.conf.get("spark.sql.session.timeZone")
    assert before is not None
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    yield
    spark.conf.set("spark.sql.session.timeZone", before)


def hand_written(directory: Path) -> list[Line]:
    """The log of a gateway with two workers and rotation; its good lines."""
    second = timedelta(seconds=1)
    appends = [  # 12:00, the oldest file: durations 1..100 ms
        line(T0 + i * 0.5 * second, "kafka", "append", wire_command="produce", messages=2,
             bytes=100 + i, duration_s=(i + 1) / 1000, backend_s=(i + 1) / 2000)
        for i in range(100)
    ]  # fmt: skip
    live = [  # 12:01
        *(line(T0 + (61 + i) * second, "kafka", "read", wire_command="fetch", messages=5,
               bytes=250, duration_s=0.004 + i / 1000, backend_s=0.001, waited_s=0.0)
          for i in range(3)),
        *(line(T0 + 62 * second, "iggy", "poll_messages", wire_command="poll_messages",
               duration_s=0.0002, error_type="not_found") for _ in range(2)),
        line(T0 + 63 * second, "kafka", "create_topic", wire_command="create_topics",
             duration_s=0.02, backend_s=0.019),
    ]  # fmt: skip
    edge = [  # the last microsecond of 12:01 and the first of 12:02
        line(T0 + 120 * second - timedelta(microseconds=1), "rabbitmq_stream", "append",
             messages=1, bytes=10, duration_s=0.003, backend_s=0.002),
        line(T0 + 120 * second, "rabbitmq_stream", "append", messages=1, bytes=10,
             duration_s=0.005, backend_s=0.004),
        line(T0 + 121 * second, "kafka", "delete_topic", duration_s=0.001, backend_s=0.001,
             error_type="not_found"),
    ]  # fmt: skip
    directory.mkdir()
    path = directory / "access.jsonl"
    no_command = {k: v for k, v in live[0].items() if k != "command"}
    write(Path(f"{path}.1"), [*appends[:50], "not json", *appends[50:]])
    write(path, [*live[:3], "", json.dumps(no_command), *live[3:],
                 '{"time":"2026-01-31T12:01:00.0000'])  # fmt: skip
    wrong_type = json.dumps({**live[0], "messages": "five"})
    write(Path(worker_path(str(path), 0)), [edge[0], wrong_type, *edge[1:]])
    return [*appends, *live, *edge]


def test_the_aggregates_of_a_hand_written_log(
    spark: SparkSession, new_york: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert tuple(KEYS) == FIELDS  # the schema Spark reads is the one the gateway writes
    logs = tmp_path / "logs [1]"  # a Hadoop glob character in the path: escaped
    good = hand_written(logs)
    out = tmp_path / "report"
    assert main(["--input", str(logs / "access.jsonl"), "--output", str(out)]) == 0
    said = capsys.readouterr().out.splitlines()
    assert said[0] == f"report: {len(good)} commands from 3 files, 4 bad lines left out"
    assert said[-1] == f"report: wrote {out / 'index.html'}"

    minutes = table(out / "by_minute.parquet")
    assert list(minutes[0]) == ["protocol", "command", "outcome", "minute", *MEASURES]
    assert minutes == expected_minutes(good)
    appends = next(r for r in minutes if r["command"] == "append" and r["protocol"] == "kafka")
    assert (appends["duration_p50_s"], appends["duration_p95_s"], appends["duration_p99_s"]) == (
        0.05, 0.095, 0.099,
    )  # fmt: skip
    # the whole period: one row per protocol, command and outcome
    summary = {
        (r["protocol"], r["command"], r["outcome"]): r for r in table(out / "summary.parquet")
    }
    assert summary[("rabbitmq_stream", "append", "ok")]["count"] == 2
    assert summary[("rabbitmq_stream", "append", "ok")]["duration_p50_s"] == 0.003
    assert summary[("kafka", "append", "ok")]["first_seen"] == T0
    assert {k: r["count"] for k, r in summary.items() if k[2] == "error"} == {
        ("iggy", "poll_messages", "error"): 2, ("kafka", "delete_topic", "error"): 1,
    }  # fmt: skip
    errors = table(out / "errors.parquet")
    assert [(r["protocol"], r["command"], r["error_type"], r["count"]) for r in errors] == [
        ("iggy", "poll_messages", "not_found", 2), ("kafka", "delete_topic", "not_found", 1),
    ]  # fmt: skip
    assert errors[1]["first_seen"] == T0 + timedelta(seconds=121)
    page = check_outputs(out)
    assert "4 bad lines" in page and "not json" in page
    assert "2026-01-31 12:00:00 UTC" in page and "2026-01-31 12:02:00 UTC" in page
    assert spark.conf.get("spark.sql.session.timeZone") == "America/New_York"  # left running


def test_a_log_without_a_good_line_still_makes_a_report(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "access.jsonl").write_text("garbage\n\n{\n")
    assert main(["--input", str(tmp_path / "access.jsonl"), "--output", str(tmp_path)]) == 0
    assert "report: 0 commands from 1 files, 2 bad lines left out" in capsys.readouterr().out
    assert table(tmp_path / "by_minute.parquet") == []
    assert "<b>0</b> commands" in check_outputs(tmp_path)


# --- a real gateway's log -----------------------------------------------------------------------

SENT = 60
IGGY_SENT = 7


def kafka_traffic(bootstrap: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(SENT):
        producer.produce("orders", key=b"k%d" % i, value=b"order-%d" % i)
        if i % 10 == 9:
            assert producer.flush(20) == 0  # a Produce request (an append line) each, or more
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "report",
                         "enable.auto.commit": False})  # fmt: skip
    consumer.assign([TopicPartition("orders", p, 0) for p in (0, 1)])
    try:
        got = 0
        while got < SENT:
            msg = consumer.poll(10)
            assert msg is not None and msg.error() is None
            got += 1
    finally:
        consumer.close()
    admin = AdminClient({"bootstrap.servers": bootstrap})  # alive until the answer came
    with pytest.raises(KafkaException, match="UNKNOWN_TOPIC"):
        admin.delete_topics(["no-such-topic"])["no-such-topic"].result(20)


def counted(lines: Sequence[Mapping[str, Any]], **where: str) -> tuple[int, int]:
    """(lines, messages) of the lines with these fields."""
    chosen = [g for g in lines if all(g[k] == v for k, v in where.items())]
    return len(chosen), sum(g["messages"] or 0 for g in chosen)


def test_report_of_a_real_gateways_access_log(spark: SparkSession, tmp_path: Path) -> None:
    data, log, out = tmp_path / "data", tmp_path / "logs" / "access.jsonl", tmp_path / "report"
    log.parent.mkdir()
    create(data, "orders", 2)
    settings = ("--set", f"access_log.path={log}", "--set", "access_log.max_bytes=4096",
                "--set", "access_log.backups=100")  # fmt: skip
    with held(lambda: running_gateway(f"embedded:{data}", tmp_path, "report", *settings)) as gw:
        kafka_traffic(gw.kafka)
        rows = [(f"event-{i}".encode(),) for i in range(IGGY_SENT)]
        (spark.createDataFrame(rows, "value binary").coalesce(1).write.format("streamgate")
         .option("url", f"iggy://iggy:iggy@{gw.addresses['iggy']}").option("topic", "orders")
         .mode("append").save())  # fmt: skip
    # stopped by SIGTERM: every line is in the files, the rotated ones too
    files = sorted(log.parent.iterdir())
    assert Path(f"{log}.1") in files
    logged = [json.loads(text) for f in files for text in f.read_text().splitlines()]

    assert main(["--input", str(log), "--output", str(out)]) == 0
    summary = table(out / "summary.parquet")
    assert sum(r["count"] for r in summary) == len(logged)
    assert {(r["protocol"], r["command"], r["outcome"]): (r["count"], r["messages"] or 0)
            for r in summary} == {
        (p, c, o): counted(logged, protocol=p, command=c, outcome=o)
        for p, c, o in {(g["protocol"], g["command"], g["outcome"]) for g in logged}
    }  # fmt: skip
    by_key = {(r["protocol"], r["command"], r["outcome"]): r for r in summary}
    # what the clients did
    assert by_key[("kafka", "append", "ok")]["messages"] == SENT
    # reads count what the store handed out: whole stored batches, which may start before the
    # offset asked (Kafka clients skip those records), and a fetch the client asks again
    assert by_key[("kafka", "read", "ok")]["messages"] >= SENT
    assert by_key[("iggy", "append", "ok")]["messages"] == IGGY_SENT
    assert by_key[("kafka", "delete_topic", "error")]["count"] == 1
    for r in summary:
        assert 0 <= r["duration_p50_s"] <= r["duration_p95_s"] <= r["duration_p99_s"]
        assert r["duration_p99_s"] <= r["duration_max_s"] < 10
    errors = table(out / "errors.parquet")
    assert ("kafka", "delete_topic", "not_found", 1) in [
        (r["protocol"], r["command"], r["error_type"], r["count"]) for r in errors
    ]
    minutes = table(out / "by_minute.parquet")
    assert sum(r["count"] for r in minutes) == len(logged)
    assert sum(r["messages"] or 0 for r in minutes if r["command"] == "append") == SENT + IGGY_SENT
    page = check_outputs(out)
    assert "delete_topic" in page and "not_found" in page and "iggy" in page


# --- spark-submit -------------------------------------------------------------------------------


def test_spark_submit_runs_the_report(tmp_path: Path) -> None:
    log = tmp_path / "access.jsonl"
    write(log, [line(T0, "rog", "append", messages=3, bytes=30, duration_s=0.001, backend_s=0.001)])
    job = start(
        [str(SPARK_HOME / "bin" / "spark-submit"), "--master", "local[1]",
         "--conf", "spark.ui.enabled=false", "--conf", "spark.ui.showConsoleProgress=false",
         str(Path(__file__).parents[2] / "pipeline" / "report" / "__main__.py"),
         "--input", str(log), "--output", str(tmp_path / "out")],
        tmp_path / "submit.log",
        spark_env(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable),
        tmp_path,
    )  # fmt: skip
    assert job.finish(90) == 0, job.text()[-4000:]
    assert "report: 1 commands from 1 files\n" in job.text()
    assert table(tmp_path / "out" / "by_minute.parquet")[0]["messages"] == 3
