"""Admin HTTP against an in-process gateway: /metrics (OpenMetrics when asked for), /livez,
/readyz, the status page and its /status.json; HEAD; a bad request never takes the port down."""

from __future__ import annotations

import json
from pathlib import Path

import trio
from prometheus_client import CollectorRegistry
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_om
from prometheus_client.parser import text_string_to_metric_families as parse_text

from gateway.admin_http import serve_admin
from gateway.app import Running
from gateway.status_page import StatusBoard
from tests.helpers.rog_client import RogClient

OPENMETRICS_ACCEPT = (
    # What Prometheus 2.x sends when it scrapes.
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;"
    "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)


async def http_request(
    address: tuple[str, int], path: str, method: str = "GET", headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    """(status, headers with lower-case names, body) of one request on its own connection."""
    stream = await trio.open_tcp_stream(*address)
    extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    async with stream:
        await stream.send_all(f"{method} {path} HTTP/1.1\r\nHost: x\r\n{extra}\r\n".encode())
        chunks = []
        while chunk := await stream.receive_some(65536):
            chunks.append(chunk)
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    fields = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), {k.lower(): v for k, v in fields.items()}, body


async def http_get(address: tuple[str, int], path: str, method: str = "GET") -> tuple[int, bytes]:
    status, _, body = await http_request(address, path, method)
    return status, body


async def test_health_endpoints(gateway: Running) -> None:
    assert gateway.admin is not None
    with trio.fail_after(10):
        assert await http_get(gateway.admin, "/livez") == (200, b"ok\n")
        assert await http_get(gateway.admin, "/readyz") == (200, b"ok\n")
        assert (await http_get(gateway.admin, "/nope"))[0] == 404
        assert (await http_get(gateway.admin, "/livez", "POST"))[0] == 405


async def test_metrics_after_rog_traffic(gateway: Running) -> None:
    assert gateway.admin is not None
    c = RogClient(*gateway.address("rog"))
    with trio.fail_after(10):
        await c.create_log("m", 1)
        await c.publish("m", 0, b"x" * 10)
        await c.fetch("m", 0, "g")
        status, body = await http_get(gateway.admin, "/metrics")
    assert status == 200
    text = body.decode()
    # Sub-millisecond buckets, labelled by protocol, canonical command and wire command.
    assert (
        'streamgate_command_duration_seconds_bucket{backend="embedded",command="append",'
        'error_type="",le="5e-05",outcome="ok",protocol="rog",wire_command="publish"}'
    ) in text
    assert 'streamgate_messages_in_total{protocol="rog"} 1.0' in text
    assert 'streamgate_messages_out_total{protocol="rog"} 1.0' in text
    assert 'streamgate_connections_total{protocol="rog"} 3.0' in text
    assert 'streamgate_build_info{backend="embedded"' in text
    # Pre-created so dashboards have series before the first request of a kind.
    assert 'streamgate_connections_active{protocol="kafka"} 0.0' in text
    overhead = 'streamgate_gateway_overhead_seconds_count{protocol="rog",wire_command="publish"}'
    assert f"{overhead} 1.0" in text


async def test_garbage_http_does_not_break_admin(gateway: Running) -> None:
    assert gateway.admin is not None
    with trio.fail_after(15):
        stream = await trio.open_tcp_stream(*gateway.admin)
        async with stream:
            await stream.send_all(b"\x00\xff garbage\r\n\r\n")
            while await stream.receive_some(1024):
                pass
        assert (await http_get(gateway.admin, "/livez"))[0] == 200


async def test_metrics_openmetrics_when_asked(gateway: Running) -> None:
    assert gateway.admin is not None
    with trio.fail_after(10):
        await RogClient(*gateway.address("rog")).create_log("om", 1)
        status, headers, body = await http_request(
            gateway.admin, "/metrics", headers={"Accept": OPENMETRICS_ACCEPT}
        )
        plain_status, plain_headers, plain = await http_request(gateway.admin, "/metrics")
    assert status == 200
    assert headers["content-type"].startswith("application/openmetrics-text; version=1.0.0")
    text = body.decode()
    assert text.endswith("# EOF\n")
    families = {f.name: f for f in parse_om(text)}  # type: ignore[no-untyped-call]
    assert families["streamgate_command_duration_seconds"].type == "histogram"
    assert families["streamgate_connections"].type == "counter"
    assert any(s.value == 1.0 for s in families["streamgate_connections"].samples)
    # The classic text format otherwise.
    assert plain_status == 200
    assert plain_headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert "# EOF" not in plain.decode()
    classic = {f.name: f for f in parse_text(plain.decode())}
    assert classic["streamgate_command_duration_seconds"].type == "histogram"


async def test_head_answers_headers_only_and_the_port_stays_up(gateway: Running) -> None:
    assert gateway.admin is not None
    with trio.fail_after(10):
        for path in ("/livez", "/metrics", "/", "/status.json"):
            status, headers, body = await http_request(gateway.admin, path, "HEAD")
            got, _, full = await http_request(gateway.admin, path)
            assert (status, body) == (200, b""), path
            assert got == 200 and int(headers["content-length"]) > 0, path
            if path != "/status.json" and path != "/metrics":  # those change between requests
                assert int(headers["content-length"]) == len(full), path
        assert await http_get(gateway.admin, "/livez") == (200, b"ok\n")


async def test_status_page_and_json_after_rog_traffic(gateway: Running) -> None:
    assert gateway.admin is not None
    c = RogClient(*gateway.address("rog"))
    with trio.fail_after(10):
        await c.create_log("s", 1)
        for i in range(5):
            await c.publish("s", 0, b"m%d" % i)
        page_status, page_headers, page = await http_request(gateway.admin, "/")
        status, headers, body = await http_request(gateway.admin, "/status.json")
    assert page_status == 200
    assert page_headers["content-type"] == "text/html; charset=utf-8"
    assert page_headers["content-security-policy"].startswith("default-src 'none'")
    assert b"<title>streamgate status</title>" in page
    assert status == 200 and headers["content-type"] == "application/json"
    assert headers["cache-control"] == "no-store"
    doc = json.loads(body)
    assert doc["ready"] is True and doc["reason"] == "ok"
    assert doc["scope"] == "this process"
    assert doc["backend"]["name"] == "embedded" and doc["backend"]["up"] == 1.0
    assert doc["backend"]["url"].startswith("embedded:")
    assert {entry["protocol"] for entry in doc["listeners"]} == {
        "rog", "kafka", "iggy", "rabbitmq_stream"
    }  # fmt: skip
    rog_address = "{}:{}".format(*gateway.address("rog"))
    assert {"protocol": "rog", "address": rog_address} in doc["listeners"]
    rog = next(row for row in doc["protocols"] if row["protocol"] == "rog")
    assert rog["accepted_total"] >= 1 and rog["messages_in_per_s"] > 0
    commands = {(c["protocol"], c["command"]): c for c in doc["commands"]}
    append = commands[("rog", "append")]
    assert append["count"] == 5
    assert append["per_s"] > 0 and append["errors_per_s"] == 0
    assert append["p99_s"] > 0
    assert doc["workers"] is None


async def test_readyz_and_status_never_show_the_backend_password(tmp_path: Path) -> None:
    """A reason that quotes the URL's secret (a backend's error message might) is redacted in
    /readyz and /status.json alike; the secret is nowhere in what the admin port serves."""
    secret = "pw-Xq8vL2"
    board = StatusBoard(
        CollectorRegistry(), backend="iggy", backend_url=f"iggy://root:{secret}@10.1.2.3:8090",
        listeners=[("iggy", "127.0.0.1", 8090)], scope="this process",
    )  # fmt: skip

    async def ready() -> tuple[bool, str]:
        return False, f"backend unavailable: root/{secret} refused by 10.1.2.3:8090"

    async with trio.open_nursery() as nursery:
        address = await nursery.start(
            lambda task_status: serve_admin(
                host="127.0.0.1", port=0, registry=board.registry, ready=ready, status=board,
                task_status=task_status,
            )
        )  # fmt: skip
        with trio.fail_after(10):
            answers = {
                path: await http_request(address, path)
                for path in ("/readyz", "/status.json", "/", "/metrics")
            }
        nursery.cancel_scope.cancel()
    assert answers["/readyz"][0] == 503
    assert answers["/readyz"][2] == b"backend unavailable: root/*** refused by 10.1.2.3:8090\n"
    doc = json.loads(answers["/status.json"][2])
    assert doc["backend"]["url"] == "iggy://root:***@10.1.2.3:8090"
    assert doc["reason"] == "backend unavailable: root/*** refused by 10.1.2.3:8090"
    for path, (_, headers, body) in answers.items():
        assert secret.encode() not in body, path
        assert all(secret not in v for v in headers.values()), path


async def test_without_a_status_board_there_is_no_page(tmp_path: Path) -> None:
    async def ready() -> tuple[bool, str]:
        return True, "ok"

    async with trio.open_nursery() as nursery:
        address = await nursery.start(
            lambda task_status: serve_admin(
                host="127.0.0.1", port=0, registry=CollectorRegistry(), ready=ready,
                task_status=task_status,
            )
        )  # fmt: skip
        with trio.fail_after(10):
            assert (await http_get(address, "/"))[0] == 404
            assert (await http_get(address, "/status.json"))[0] == 404
            assert await http_get(address, "/readyz") == (200, b"ok\n")
        nursery.cancel_scope.cancel()
