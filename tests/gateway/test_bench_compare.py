"""``streamgate bench compare`` once, on the Kafka rows only, against a real Tansu started here:
the JSON holds each row's ways with their message counts and a positive server CPU for every
server measured. Structure only; the figures are the bench's business."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

from gateway.cli import main
from tests.helpers.tansu import running_tansu

pytestmark = pytest.mark.slow

# Enough that the gateway spends many of /proc's clock ticks (10 ms) on it. Tansu spends about
# 0.5 µs a message, one tick for 20,000: its figure can round to zero (a fresh-clone run met it),
# so a broker's figure must be there and not negative, a gateway's above zero.
MESSAGES = 20_000
ROLES = {  # way -> the servers whose CPU it measures
    "kafka-embedded": {"gateway"},
    "kafka-direct": {"broker"},
    "kafka-proxy": {"gateway", "broker"},
    "kafka-embedded-1000p": {"gateway"},
}


async def test_kafka_rows_in_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "compare.json"
    async with running_tansu(tmp_path) as tansu:
        assert tansu.process is not None
        argv = [
            "bench", "compare", "--kafka-url", tansu.url, "--kafka-pid", str(tansu.process.pid),
            "--rows", "kafka,kafka-proxy,kafka-partitions", "--sizes", "100",
            "--messages", str(MESSAGES), "--rounds", "1", "--no-warm-up", "--json", str(out),
        ]  # fmt: skip
        with trio.fail_after(90):  # 2 gateways, 4 ways, a consumer process per way
            code = await trio.to_thread.run_sync(lambda: main(argv), abandon_on_cancel=True)
    assert code == 0
    found = json.loads(out.read_text())
    assert [(r["row"], r["size"]) for r in found["rows"]] == [
        ("kafka", 100), ("kafka-proxy", 100), ("kafka-partitions", 100),
    ]  # fmt: skip
    assert found["skipped"] == {}
    assert found["versions"]["kafka broker"].startswith("tansu ")
    for row in found["rows"]:
        for way, figures in row["ways"].items():
            (phases,) = figures["rounds"]  # one round
            assert [p["name"] for p in phases] == ["produce", "consume", "produce+consume"]
            assert all(p["messages"] == MESSAGES for p in phases)
            both = figures["median"]["produce+consume"]
            assert both["messages"] == MESSAGES and both["msg_per_s"] > 0
            for role in ROLES[way]:
                cpu = both[f"{role}_cpu_us_per_msg"]
                assert isinstance(cpu, float) and cpu >= 0, (row["row"], way, role)
                if role == "gateway":
                    assert cpu > 0, (row["row"], way, role)
        # A ratio for every phase whose bottom server spent a tick; the gateway always does.
        bottom_way = "kafka-direct" if "kafka-direct" in row["ways"] else "kafka-embedded"
        bottom_role = "broker" if bottom_way == "kafka-direct" else "gateway"
        bottom = row["ways"][bottom_way]["median"]
        bottom_spent = {p for p, f in bottom.items() if f[f"{bottom_role}_cpu_us_per_msg"]}
        assert {r["phase"] for r in row["ratios"]} == bottom_spent, row["row"]
        assert all(r["value"] >= 0 for r in row["ratios"]), row["row"]
        if row["row"] == "kafka-partitions":
            assert len(bottom_spent) == 3
    assert "skipped" not in capsys.readouterr().out  # every row asked for ran


def test_rows_without_their_broker_are_skipped_and_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "compare.json"
    argv = ["bench", "compare", "--rows", "kafka,rabbitmq-proxy", "--kafka-url",
            "kafka://127.0.0.1:1", "--json", str(out)]  # fmt: skip
    assert main(argv) == 0
    shown = capsys.readouterr().out
    assert "skipping row kafka: needs --kafka-url and --kafka-pid" in shown
    assert "skipped rabbitmq-proxy: needs --rabbitmq-url and --rabbitmq-pid" in shown
    found = json.loads(out.read_text())
    assert found["rows"] == [] and set(found["skipped"]) == {"kafka", "rabbitmq-proxy"}


async def test_iggy_row_meters_send_and_poll(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The Iggy row (apache-iggy against an embedded gateway) meters sending and polling
    apart, as the Kafka rows do producing and consuming: send+poll is their sum."""
    out = tmp_path / "compare.json"
    argv = ["bench", "compare", "--rows", "iggy", "--sizes", "1024", "--messages", str(MESSAGES),
            "--rounds", "1", "--no-warm-up", "--json", str(out)]  # fmt: skip
    with trio.fail_after(90):
        code = await trio.to_thread.run_sync(lambda: main(argv), abandon_on_cancel=True)
    assert code == 0
    (row,) = json.loads(out.read_text())["rows"]
    (phases,) = row["ways"]["iggy-embedded"]["rounds"]
    assert [p["name"] for p in phases] == ["send", "poll", "send+poll"]
    assert all(p["messages"] == MESSAGES for p in phases)
    send, poll, both = (p["cpu_s"]["gateway"] for p in phases)
    assert send > 0 and poll > 0 and both == pytest.approx(send + poll)
    assert "skipped" not in capsys.readouterr().out
