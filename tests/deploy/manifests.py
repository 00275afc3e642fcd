"""The Kubernetes overlays of deploy/kubernetes as the tests see them: rendered by
``kubectl kustomize``, parsed, and the pieces the tests look at picked out (pod specs, the
gateway's container, the ConfigMap's TOML, a container's environment as the kubelet would set
it)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from tests.deploy.tools import run_tool

__all__ = [
    "KUSTOMIZE",
    "OVERLAYS",
    "Pod",
    "container_env",
    "documents",
    "one",
    "pods",
    "render",
]

ROOT = Path(__file__).resolve().parents[2]
KUSTOMIZE = ROOT / "deploy" / "kubernetes"
OVERLAYS = ("standalone", "proxy", "sidecar")
GATEWAY = "streamgate"  # the gateway container's name in every overlay

Doc = dict[str, Any]


@cache
def render(overlay: str) -> str:
    result = run_tool("kubectl", "kustomize", str(KUSTOMIZE / overlay))
    # A warning (a deprecated field, say) fails too: it is the day to fix it.
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    return result.stdout


def documents(overlay: str) -> list[Doc]:
    docs = [d for d in yaml.safe_load_all(render(overlay)) if d]
    assert all(isinstance(d, dict) for d in docs)
    return docs


def one(docs: list[Doc], kind: str) -> Doc:
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, (kind, [d["kind"] for d in docs])
    return found[0]


@dataclass(frozen=True)
class Pod:
    """A workload's pod template: its spec, labels, and the containers in it."""

    workload: Doc
    spec: Doc
    labels: dict[str, str]

    def containers(self) -> Iterator[Doc]:
        yield from self.spec.get("initContainers", [])
        yield from self.spec["containers"]

    @property
    def gateway(self) -> Doc:
        found = [c for c in self.containers() if c["name"] == GATEWAY]
        assert len(found) == 1, [c["name"] for c in self.containers()]
        return found[0]


def pods(docs: list[Doc]) -> list[Pod]:
    return [
        Pod(d, d["spec"]["template"]["spec"], d["spec"]["template"]["metadata"]["labels"])
        for d in docs
        if d["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job")
    ]


_REFERENCE = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def container_env(
    container: Doc, *, namespace: str, secrets: Mapping[tuple[str, str], str]
) -> dict[str, str]:
    """The environment the kubelet gives ``container``: literal values with ``$(VAR)``
    references to earlier variables expanded, the pod's namespace for the downward API, and
    ``secrets[(name, key)]`` for secret keys (an optional key that is not there is left out; a
    required one must be given)."""
    env: dict[str, str] = {}
    for item in container.get("env", []):
        name = item["name"]
        if "value" in item:
            env[name] = _REFERENCE.sub(lambda m: env.get(m[1], m[0]), item["value"])
            continue
        source = item["valueFrom"]
        if "fieldRef" in source:
            assert source["fieldRef"]["fieldPath"] == "metadata.namespace", source
            env[name] = namespace
        elif "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            key = (ref["name"], ref["key"])
            if key in secrets:
                env[name] = secrets[key]
            else:
                assert ref.get("optional", False), f"no value given for the secret key {key}"
        else:
            raise AssertionError(f"{name}: an env source the tests do not model: {source}")
    return env
