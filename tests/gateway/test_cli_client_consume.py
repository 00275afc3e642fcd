"""``streamgate produce`` and ``consume`` as real processes on the embedded store: synthetic
load, input files, groups and offsets, following, Ctrl-C, and the progress line (stderr only)."""

from __future__ import annotations

import base64
import os
import signal
import subprocess
from pathlib import Path

import trio

from gateway.app import Running
from tests.helpers.client_cli import Ran, cli, cli_command, cli_env, json_lines


def _ok(ran: Ran) -> Ran:
    assert ran.code == 0, ran
    return ran


def _numbers(ran: Ran) -> list[int]:
    """The numbers of synthetic messages (``<n> xxx...``)."""
    return [int(line.split()[0]) for line in ran.lines]


async def test_synthetic_load_groups_and_offsets(tmp_path: Path) -> None:
    at = ("--url", f"embedded:{tmp_path / 'data'}")
    _ok(await cli("topics", "create", "load", *at))
    produced = _ok(await cli("produce", "load", "--count", "25", "--size", "16", "--batch", "10",
                             *at))  # fmt: skip
    assert produced.lines == ["acknowledged 25 messages on 'load' partition 0, offsets 0..24"]

    first = _ok(await cli("consume", "load", "--group", "g", "--count", "10", *at))
    assert first.lines[0] == "0 xxxxxxxxxxxxxx"
    assert _numbers(first) == list(range(10))
    # The group goes on after what was printed, then has nothing left.
    assert _numbers(_ok(await cli("consume", "load", "--group", "g", *at))) == list(range(10, 25))
    assert _ok(await cli("consume", "load", "--group", "g", *at)).out == ""
    # An explicit start wins over the committed offset; -N counts back from the end.
    again = _ok(await cli("consume", "load", "--group", "g", "--from", "20", *at))
    assert _numbers(again) == [20, 21, 22, 23, 24]
    assert _numbers(_ok(await cli("consume", "load", "--from", "-3", *at))) == [22, 23, 24]
    assert _ok(await cli("consume", "load", "--from", "latest", *at)).out == ""

    size = await cli("produce", "load", "--size", "5", *at)
    assert (size.code, size.err) == (2, "streamgate produce: --size needs --count\n")


async def test_input_file_keys_and_binary_values(tmp_path: Path) -> None:
    at = ("--url", f"embedded:{tmp_path / 'data'}")
    _ok(await cli("topics", "create", "kv", *at))
    source = tmp_path / "in.txt"
    source.write_bytes(b"k1:v1\nk2:a:b\nno key here\n\xff\xfe\n")
    produced = _ok(await cli("produce", "kv", "--file", str(source), "--key-separator", ":",
                             "--key", "fallback", *at))  # fmt: skip
    assert produced.lines == ["acknowledged 4 messages on 'kv' partition 0, offsets 0..3"]
    got = json_lines(_ok(await cli("consume", "kv", "--format", "json", *at)))
    assert [(m["key"], m["value"]) for m in got[:3]] == [
        ("k1", "v1"), ("k2", "a:b"), ("fallback", "no key here"),
    ]  # fmt: skip
    assert got[3]["value"] is None
    assert base64.b64decode(got[3]["value_base64"]) == b"\xff\xfe"

    missing = await cli("produce", "kv", "--file", str(tmp_path / "nope.txt"), *at)
    assert missing.code == 1
    assert missing.err.startswith(f"streamgate: cannot read {tmp_path / 'nope.txt'}")


async def test_follow_waits_for_new_messages(gateway: Running) -> None:
    # Through a gateway: the embedded store is one process's, so a second process appending to
    # its directory would not wake a follower there.
    host, port = gateway.address("kafka")
    at = ("--url", f"kafka://{host}:{port}")
    _ok(await cli("topics", "create", "live", *at))
    with trio.fail_after(30):
        follower = await trio.lowlevel.open_process(
            cli_command("consume", "live", "--follow", "--count", "3", *at),
            stdout=subprocess.PIPE, env=cli_env(),
        )  # fmt: skip
        try:
            assert follower.stdout is not None
            # Whenever the follower starts, it reads from the earliest: no race with produce.
            _ok(await cli("produce", "live", *at, stdin=b"one\ntwo\nthree\nfour\n"))
            out = await _rest(follower.stdout)
            assert await follower.wait() == 0
        finally:
            if follower.returncode is None:
                follower.kill()  # by pid: the process this test started
    assert out == b"one\ntwo\nthree\n"


async def _rest(stream: trio.abc.ReceiveStream) -> bytes:
    out = b""
    while chunk := await stream.receive_some():
        out += chunk
    return out


async def test_ctrl_c_ends_a_follower_quietly(tmp_path: Path) -> None:
    at = ("--url", f"embedded:{tmp_path / 'data'}")
    _ok(await cli("topics", "create", "live", *at))
    with trio.fail_after(30):
        follower = await trio.lowlevel.open_process(
            cli_command("consume", "live", "--follow", "--progress", *at),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env(),
            # A test runner started in the background may ignore SIGINT; the CLI must not.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )  # fmt: skip
        try:
            assert follower.stderr is not None and follower.stdout is not None
            err = await follower.stderr.receive_some()  # the progress line: it is running
            assert b"consumed 0 messages" in err
            follower.send_signal(signal.SIGINT)
            assert await follower.wait() == 130
            err += await _rest(follower.stderr)
        finally:
            if follower.returncode is None:
                follower.kill()
    assert b"Traceback" not in err and b"KeyboardInterrupt" not in err


async def test_progress_goes_to_stderr_only(tmp_path: Path) -> None:
    at = ("--url", f"embedded:{tmp_path / 'data'}")
    _ok(await cli("topics", "create", "p", *at))
    produced = _ok(await cli("produce", "p", "--count", "3000", "--progress", *at))
    assert produced.lines == ["acknowledged 3000 messages on 'p' partition 0, offsets 0..2999"]
    last = produced.err.rsplit("\r", 1)[-1]
    assert last.startswith("produced 3,000 messages") and last.endswith("\n")
    assert "msg/s" in last and "MB/s" in last

    consumed = _ok(await cli("consume", "p", "--progress", *at))
    assert _numbers(consumed) == list(range(3000))
    assert consumed.err.rsplit("\r", 1)[-1].startswith("consumed 3,000 messages")
    # Not a terminal and not forced: nothing on stderr.
    assert _ok(await cli("consume", "p", "--count", "1", *at)).err == ""


async def test_progress_follows_the_terminal(tmp_path: Path) -> None:
    at = ("--url", f"embedded:{tmp_path / 'data'}")
    _ok(await cli("topics", "create", "p", *at))
    for flags, shown in (((), True), (("--no-progress",), False)):
        controller, terminal = os.openpty()
        try:
            with trio.fail_after(30):
                done = await trio.run_process(
                    cli_command("produce", "p", "--count", "10", *flags, *at),
                    capture_stdout=True, stderr=terminal, check=False, env=cli_env(),
                )  # fmt: skip
            os.close(terminal)
            err = _drain(controller)
        finally:
            os.close(controller)
        assert done.returncode == 0
        assert done.stdout.startswith(b"acknowledged 10 messages")
        assert (b"produced 10 messages" in err) is shown, err


def _drain(controller: int) -> bytes:
    """What the child wrote to the terminal (its end is closed: EIO after the last byte)."""
    out = b""
    while True:
        try:
            chunk = os.read(controller, 4096)
        except OSError:
            return out
        if not chunk:
            return out
        out += chunk


async def test_a_reader_that_goes_away_ends_consume_quietly(tmp_path: Path) -> None:
    at = ("--url", f"embedded:{tmp_path / 'data'}")
    _ok(await cli("topics", "create", "big", *at))
    _ok(await cli("produce", "big", "--count", "5000", "--size", "100", *at))  # > a pipe's 64 KiB
    with trio.fail_after(30):
        reader = await trio.lowlevel.open_process(
            cli_command("consume", "big", *at),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env(),
        )  # fmt: skip
        try:
            assert reader.stdout is not None and reader.stderr is not None
            assert (await reader.stdout.receive_some()).startswith(b"0 xxx")
            await reader.stdout.aclose()  # as `| head -1` does
            err = await _rest(reader.stderr)
            assert await reader.wait() == 0
        finally:
            if reader.returncode is None:
                reader.kill()
    assert err == b""
