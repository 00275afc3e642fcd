"""Just enough of a Dockerfile parser for the tests to hold the image to what they run on the
host: instructions (continuation lines joined, comments dropped) grouped into stages.

Not a general parser: no heredocs, no escape directive, no ARG expansion (deploy/Dockerfile uses
none of them, and ``test_dockerfile.py`` fails if it starts to).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Instruction", "Stage", "parse"]


@dataclass(frozen=True)
class Instruction:
    keyword: str  # upper case: FROM, COPY, RUN...
    text: str  # the arguments, continuation lines joined
    line: int

    def flags_and_words(self) -> tuple[dict[str, list[str]], list[str]]:
        """``--name=value`` flags in front (a name may repeat), then the shell words."""
        words = shlex.split(self.text)
        flags: dict[str, list[str]] = {}
        while words and words[0].startswith("--"):
            name, _, value = words.pop(0)[2:].partition("=")
            flags.setdefault(name, []).append(value)
        return flags, words

    def exec_form(self) -> list[str]:
        """The JSON array of an exec-form instruction (``CMD ["a", "b"]``)."""
        value = json.loads(self.text)
        assert isinstance(value, list) and all(isinstance(w, str) for w in value), self
        return value


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]


def parse(path: Path) -> list[Stage]:
    stages: list[Stage] = []
    pending = ""
    start = 0
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue  # a comment between continuation lines
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        text = pending + line
        pending = ""
        keyword, _, rest = text.partition(" ")
        instruction = Instruction(keyword.upper(), rest.strip(), start)
        if instruction.keyword == "FROM":
            words = instruction.text.split()
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            stages.append(Stage(words[0], name))
        else:
            assert stages, f"{path}:{start}: {keyword} before FROM"
            stages[-1].instructions.append(instruction)
    assert not pending, f"{path}: ends inside a continued line"
    return stages
