"""deploy/Dockerfile carried out on the host, where no container engine can build it: every
path the image would have lives under one directory (``root``), and the Dockerfile's own
instructions are followed in order.

- ``COPY`` copies from the build context (or, ``--from`` a stage, from ``root``: the stages
  share it here, and their paths do not collide);
- ``RUN`` runs the install script the image runs (deploy/docker/install.sh), with the same
  arguments, absolute paths moved under ``root`` and bind mounts made as links; the one other
  kind of step, the account set-up (``groupadd``...), cannot be done on a host and is left to
  ``test_dockerfile.py``, which reads it. Any other ``RUN`` fails here: what the image does, the
  host test must do too;
- ``ENV`` builds the environment, paths moved under ``root`` (``PATH`` entry by entry);
- ``ENTRYPOINT`` + ``CMD`` and ``HEALTHCHECK`` become host commands.

The interpreter is the test's own Python (the image's is the base image's, the same minor
version) in place of the base image's ``python3``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tests.deploy.dockerfile import Instruction, parse

__all__ = ["HostImage", "build_on_host"]

INSTALL_SCRIPT = "deploy/docker/install.sh"
ACCOUNT_SET_UP = "groupadd"  # the first word of the one RUN step a host cannot carry out
STEP_LIMIT_S = 600.0  # building the wheel, or installing it with its dependencies


@dataclass
class HostImage:
    root: Path
    env: dict[str, str] = field(default_factory=dict)
    workdir: Path | None = None
    command: list[str] = field(default_factory=list)  # ENTRYPOINT + CMD, resolved
    healthcheck: list[str] = field(default_factory=list)
    steps: list[list[str]] = field(default_factory=list)  # install.sh arguments, as written

    def inside(self, path: str) -> Path:
        """Where the image's absolute ``path`` is on the host."""
        assert path.startswith("/"), path
        return self.root / path.lstrip("/")

    def which(self, name: str) -> str:
        """``name`` looked up on the image's PATH."""
        if "/" in name:
            return str(self.inside(name))
        for entry in self.env["PATH"].split(os.pathsep):
            if (Path(entry) / name).is_file():
                return str(Path(entry) / name)
        raise AssertionError(f"{name} is not on the image's PATH {self.env['PATH']}")


def _copy(source: Path, dest: Path) -> None:
    if source.is_dir():
        # What deploy/Dockerfile.dockerignore keeps out of the build context.
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
        shutil.copytree(source, dest, dirs_exist_ok=True, ignore=ignore)
    else:
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, dest)


def _do_copy(image: HostImage, context: Path, ins: Instruction) -> None:
    flags, words = ins.flags_and_words()
    *sources, dest = words
    from_stage = flags.get("from")
    for source in sources:
        origin = image.inside(source) if from_stage else context / source
        assert origin.exists(), f"line {ins.line}: {origin} does not exist"
        into_dir = dest.endswith("/") or len(sources) > 1
        target = image.inside(dest) / origin.name if into_dir and origin.is_file() else None
        _copy(origin, target or image.inside(dest))


def _mapped(image: HostImage, word: str) -> str:
    return str(image.inside(word)) if word.startswith("/") else word


def _do_run(image: HostImage, context: Path, ins: Instruction) -> None:
    flags, words = ins.flags_and_words()
    if words[0] == ACCOUNT_SET_UP:
        return
    script = Path(image.which(words[0]))
    assert script.read_bytes() == (context / INSTALL_SCRIPT).read_bytes(), (
        f"line {ins.line}: RUN {words[0]} is not {INSTALL_SCRIPT}, the one step the host can run"
    )
    for mount in flags.get("mount", []):
        options = dict(part.partition("=")[::2] for part in mount.split(","))
        assert options.get("type") == "bind", f"line {ins.line}: mount {mount}"
        target = image.inside(options["target"])
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(image.inside(options["source"]))
    image.steps.append(words[1:])
    subprocess.run(
        ["sh", str(script), *(_mapped(image, w) for w in words[1:])],
        env={**os.environ, "PYTHON": sys.executable}, check=True, timeout=STEP_LIMIT_S,
    )  # fmt: skip


def _do_env(image: HostImage, ins: Instruction) -> None:
    for pair in shlex.split(ins.text):
        key, sep, value = pair.partition("=")
        assert sep, f"line {ins.line}: ENV {pair} (only the key=value form is read)"
        if key == "PATH":
            entries = [
                image.env["PATH"] if e == "$PATH" else _mapped(image, e) for e in value.split(":")
            ]  # fmt: skip
            image.env[key] = os.pathsep.join(entries)
        else:
            assert "$" not in value, f"line {ins.line}: ENV {pair} (no expansion here)"
            image.env[key] = _mapped(image, value)


def build_on_host(dockerfile: Path, context: Path, root: Path) -> HostImage:
    # The base image's PATH begins with /usr/local/bin (the script's place); the host's own
    # PATH after it stands for the rest of the base image (sh, find).
    image = HostImage(root)
    image.env["PATH"] = os.pathsep.join([str(image.inside("/usr/local/bin")), os.environ["PATH"]])
    entrypoint: list[str] = []
    cmd: list[str] = []
    for stage in parse(dockerfile):
        for ins in stage.instructions:
            match ins.keyword:
                case "COPY":
                    _do_copy(image, context, ins)
                case "RUN":
                    _do_run(image, context, ins)
                case "ENV":
                    _do_env(image, ins)
                case "WORKDIR":
                    image.workdir = image.inside(ins.text)
                case "ENTRYPOINT":
                    entrypoint = ins.exec_form()
                case "CMD":
                    cmd = ins.exec_form()
                case "HEALTHCHECK":
                    check = Instruction("CMD", ins.text.partition("CMD ")[2], ins.line)
                    image.healthcheck = [_mapped(image, w) for w in check.exec_form()]
                case "USER" | "VOLUME" | "EXPOSE" | "STOPSIGNAL" | "ARG" | "LABEL":
                    pass  # nothing to do on the host; test_dockerfile.py reads them
                case _:
                    raise AssertionError(f"line {ins.line}: {ins.keyword} is not carried out")
    command = entrypoint + cmd
    image.command = [image.which(command[0]), *command[1:]]
    image.healthcheck[0] = image.which(image.healthcheck[0])
    return image
