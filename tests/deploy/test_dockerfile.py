"""deploy/Dockerfile read without a container engine: hadolint finds nothing (every rule, style
included, inline ignores disabled), and the file says what the image must be: two stages with the
wheel built in the first, a fixed unprivileged user, the gateway's HEALTHCHECK, its config with
every listener on all interfaces. test_image.py runs its install steps."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from gateway.config import Config, load
from tests.deploy.dockerfile import parse
from tests.deploy.tools import run_tool

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
K8S_CONFIG = ROOT / "deploy" / "kubernetes" / "base" / "config" / "streamgate.toml"


def hadolint(path: Path) -> tuple[int, list[dict[str, object]]]:
    result = run_tool(
        "hadolint", "--format", "json", "--failure-threshold", "style",
        "--disable-ignore-pragma", str(path),
    )  # fmt: skip
    return result.returncode, json.loads(result.stdout or "[]")


def test_hadolint_finds_nothing() -> None:
    returncode, findings = hadolint(DOCKERFILE)
    assert (returncode, findings) == (0, [])


def test_hadolint_does_lint(tmp_path: Path) -> None:
    """The control: the same invocation reports what it should on a careless Dockerfile."""
    careless = tmp_path / "Dockerfile"
    careless.write_text(
        "FROM python\nRUN apt-get update && apt-get install -y curl\nRUN pip install trio\n"
    )
    returncode, findings = hadolint(careless)
    assert returncode == 1
    assert {"DL3006", "DL3008", "DL3013", "DL3042"} <= {f["code"] for f in findings}


def test_two_stages_and_the_wheel_built_in_the_first() -> None:
    build, final = parse(DOCKERFILE)
    assert build.name == "build" and final.name is None
    assert build.base == final.base and ":" in final.base  # one pinned Python base
    build_runs = [r.flags_and_words() for r in build.all("RUN")]
    assert [(flags, words[:2]) for flags, words in build_runs] == [
        ({}, ["streamgate-install", "wheel"])
    ]
    (install,) = [
        (flags, words) for flags, words in (r.flags_and_words() for r in final.all("RUN"))
        if words[0] == "streamgate-install"
    ]  # fmt: skip
    flags, words = install
    assert words[1] == "venv"
    # The wheel (and the pins) come from the build stage, mounted for that step only.
    assert flags["mount"] and all("from=build" in m for m in flags["mount"]), flags
    # The source tree reaches the first stage only; the image gets the wheel by a mount.
    assert not [c for c in final.all("COPY") if "gateway" in c.text or "protocols" in c.text]
    # What tests/deploy/image.py can follow: no ARG expansion, no heredoc.
    for stage in (build, final):
        assert not stage.all("ARG") and all("<<" not in r.text for r in stage.all("RUN"))


def test_the_image_runs_as_a_fixed_unprivileged_user() -> None:
    final = parse(DOCKERFILE)[-1]
    (user,) = final.all("USER")
    uid, gid = (int(x) for x in user.text.split(":"))
    assert uid >= 1000 and gid >= 1000
    # The one RUN the host cannot replay (tests/deploy/image.py) creates exactly that account.
    (account,) = [r for r in final.all("RUN") if r.text.startswith("groupadd")]
    words = shlex.split(account.text)
    assert words[words.index("--gid") + 1] == str(gid)
    assert words[words.index("--uid") + 1] == str(uid)
    assert final.instructions.index(user) > final.instructions.index(account)


def test_the_image_config_and_how_it_is_found() -> None:
    final = parse(DOCKERFILE)[-1]
    env = dict(pair.partition("=")[::2] for e in final.all("ENV") for pair in shlex.split(e.text))
    copies = {shlex.split(c.text)[-1]: shlex.split(c.text)[0] for c in final.all("COPY")}
    source = copies[env["STREAMGATE_CONFIG"]]
    config = load(ROOT / source)
    assert config.host == "0.0.0.0"
    # The embedded log in the image's working directory, which is its volume.
    (workdir,) = final.all("WORKDIR")
    (volume,) = final.all("VOLUME")
    assert config.backend.url == f"embedded:{workdir.text}"
    assert json.loads(volume.text) == [workdir.text]
    # The same drain time as the Kubernetes ConfigMap (and the default).
    assert config.limits.drain_timeout_s == load(K8S_CONFIG).limits.drain_timeout_s
    assert config.limits.drain_timeout_s == Config().limits.drain_timeout_s
    # Every listener's and the admin port's default is exposed.
    (expose,) = final.all("EXPOSE")
    listeners = config.listeners
    wanted = {listeners.rog.port, listeners.kafka.port, listeners.iggy.port,
              listeners.rabbitmq_stream.port, config.admin.port}  # fmt: skip
    assert {int(p) for p in expose.text.split()} == wanted


def test_the_healthcheck_asks_livez_and_sigterm_stops() -> None:
    final = parse(DOCKERFILE)[-1]
    (check,) = final.all("HEALTHCHECK")
    command = json.loads(check.text.partition("CMD ")[2])
    copies = {shlex.split(c.text)[-1]: shlex.split(c.text)[0] for c in final.all("COPY")}
    script = ROOT / copies[command[1]]
    assert command[0] == "python" and "/livez" in script.read_text()
    (stop,) = final.all("STOPSIGNAL")
    assert stop.text == "SIGTERM"
    (entrypoint,) = final.all("ENTRYPOINT")
    (cmd,) = final.all("CMD")
    assert json.loads(entrypoint.text) + json.loads(cmd.text) == ["streamgate", "run"]
