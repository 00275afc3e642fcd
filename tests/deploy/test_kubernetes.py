"""deploy/kubernetes: each overlay rendered with ``kubectl kustomize`` and validated strictly
against the Kubernetes 1.33 schemas (kubernetes-validate), then held to what the gateway needs.

kubernetes-validate has no schemas for custom resources: the Prometheus Operator's
ServiceMonitor and PodMonitor are reported as "no schema" and their shape is checked here
instead (known fields, references to real ports and labels). Everything else must pass strictly,
and a control case shows that strict mode does reject an unknown field.

The gateway-specific checks read the ConfigMap's TOML through the gateway's own config loader,
with each container's environment as the kubelet would build it.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway import __version__
from gateway.config import Config, ConfigError, load
from tests.deploy.dockerfile import parse
from tests.deploy.manifests import (
    OVERLAYS,
    Pod,
    container_env,
    documents,
    one,
    pods,
    render,
)
from tests.deploy.tools import run_tool

ROOT = Path(__file__).resolve().parents[2]
KUBERNETES_VERSION = "1.33"
CRDS = {"ServiceMonitor", "PodMonitor"}  # monitoring.coreos.com/v1: no schema to validate with
MONITORS = {"standalone": "ServiceMonitor", "proxy": "ServiceMonitor", "sidecar": "PodMonitor"}
# terminationGracePeriodSeconds = preStop sleep + limits.drain_timeout_s + CLOSE_MARGIN_S (+ the
# application's own stop, in the sidecar pod: it stops before its native sidecar does).
CLOSE_MARGIN_S = 5
APP_STOP_S = {"sidecar": 10}
NAMESPACE = "shop"
SECRETS = {
    ("streamgate", "backend-url"): "rabbitmq-stream://app:pw@rabbitmq.messaging.svc:5552/%2F",
    ("streamgate", "root-password"): "not-iggy",
}
LOCKED_DOWN = {
    "runAsNonRoot": True,
    "readOnlyRootFilesystem": True,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}
PORT_NAMES = {
    "kafka": "kafka", "rabbitmq-stream": "rabbitmq_stream", "iggy": "iggy", "rog": "rog",
}  # fmt: skip


def gateway_config(overlay: str, pod: Pod, tmp_path: Path) -> Config:
    """What the gateway container of ``pod`` runs with: the ConfigMap's file at the path its
    STREAMGATE_CONFIG names, and its environment (secrets from SECRETS)."""
    configmap = one(documents(overlay), "ConfigMap")
    env = container_env(pod.gateway, namespace=NAMESPACE, secrets=SECRETS)
    mount = config_mount(pod)
    assert env["STREAMGATE_CONFIG"].startswith(mount["mountPath"] + "/"), env
    key = env["STREAMGATE_CONFIG"].removeprefix(mount["mountPath"] + "/")
    path = tmp_path / key
    path.write_text(configmap["data"][key])
    return load(path, environ={**env, "STREAMGATE_CONFIG": str(path)})


def config_mount(pod: Pod) -> dict[str, Any]:
    volumes = {v["name"]: v for v in pod.spec["volumes"]}
    mounts = [m for m in pod.gateway["volumeMounts"] if "configMap" in volumes.get(m["name"], {})]
    assert len(mounts) == 1 and mounts[0].get("readOnly") is True, mounts
    return dict(mounts[0])


def gateway_pod(overlay: str) -> Pod:
    found = [p for p in pods(documents(overlay)) if any(
        c["name"] == "streamgate" for c in p.containers())]  # fmt: skip
    assert len(found) == 1
    return found[0]


def validate(tmp_path: Path, text: str) -> tuple[int, list[str]]:
    path = tmp_path / "rendered.yaml"
    path.write_text(text)
    result = run_tool("kubernetes-validate", "--strict", "-k", KUBERNETES_VERSION, str(path))
    assert not result.stderr.strip(), result.stderr
    return result.returncode, result.stdout.splitlines()


# --- rendering and schemas -----------------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_renders_and_validates_strictly(overlay: str, tmp_path: Path) -> None:
    docs = documents(overlay)
    returncode, lines = validate(tmp_path, render(overlay))
    assert returncode == 0, lines
    for doc in docs:
        what = f"{doc['kind'].lower()}/{doc['metadata']['name']}"
        said = [line for line in lines if what in line or f"kind {doc['kind']} " in line]
        if doc["kind"] in CRDS:
            assert doc["apiVersion"] == "monitoring.coreos.com/v1"
            assert any("Couldn't find schema" in line for line in said), (what, lines)
        else:
            assert said == [line for line in said if "passed" in line] and said, (what, lines)
    assert {d["kind"] for d in docs} & CRDS == {MONITORS[overlay]}
    assert len(lines) == len(docs), lines  # one verdict per resource, nothing else


def test_strict_validation_rejects_what_a_typo_makes(tmp_path: Path) -> None:
    """The control for the test above: strict mode is on and rejects an unknown field and a
    wrong type, so "passed" there means something."""
    docs = documents("standalone")
    statefulset = copy.deepcopy(one(docs, "StatefulSet"))
    statefulset["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}
    returncode, lines = validate(tmp_path, yaml.safe_dump(statefulset))
    assert returncode == 1 and "readinesProbe" in "\n".join(lines), lines
    statefulset = copy.deepcopy(one(docs, "StatefulSet"))
    statefulset["spec"]["replicas"] = "one"
    returncode, lines = validate(tmp_path, yaml.safe_dump(statefulset))
    assert returncode == 1 and "replicas" in "\n".join(lines), lines


# --- what every pod and container has --------------------------------------------------------


def image_user() -> tuple[int, int]:
    final = parse(ROOT / "deploy" / "Dockerfile")[-1]
    (user,) = final.all("USER")
    uid, gid = user.text.split(":")
    return int(uid), int(gid)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_container_is_locked_down(overlay: str) -> None:
    uid, gid = image_user()
    for pod in pods(documents(overlay)):
        spec = pod.spec
        # A Service named streamgate in the namespace would otherwise add STREAMGATE_PORT,
        # STREAMGATE_SERVICE_HOST... to the environment (test_service_links_... below).
        assert spec["enableServiceLinks"] is False
        assert spec["automountServiceAccountToken"] is False
        context = spec["securityContext"]
        assert context["runAsNonRoot"] is True
        assert (context["runAsUser"], context["runAsGroup"]) == (uid, gid)
        assert context["seccompProfile"] == {"type": "RuntimeDefault"}
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        claims = {
            c["metadata"]["name"] for c in pod.workload["spec"].get("volumeClaimTemplates", [])
        }
        for container in pod.containers():
            name = f"{overlay}/{container['name']}"
            assert container["securityContext"] == LOCKED_DOWN, name
            resources = container["resources"]
            assert set(resources["requests"]) == {"cpu", "memory"}, name
            assert set(resources["limits"]) == {"cpu", "memory"}, name
            # The root filesystem is read-only: every writable mount is a volume of the pod's,
            # and /tmp is one of them.
            mounts = {m["mountPath"]: m for m in container.get("volumeMounts", [])}
            assert "/tmp" in mounts, name
            for mount in mounts.values():
                source = volumes.get(mount["name"])
                if mount.get("readOnly"):
                    continue
                assert mount["name"] in claims or (source is not None and "emptyDir" in source), (
                    name, mount,
                )  # fmt: skip


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_gateway_is_probed_on_its_admin_port(overlay: str, tmp_path: Path) -> None:
    pod = gateway_pod(overlay)
    config = gateway_config(overlay, pod, tmp_path)
    container = pod.gateway
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["metrics"] == config.admin.port
    # Probes reach the pod's address: the admin port listens there.
    assert (config.admin.host or config.host) == "0.0.0.0"
    expected = {"startupProbe": "/livez", "livenessProbe": "/livez", "readinessProbe": "/readyz"}
    for probe, path in expected.items():
        assert container[probe]["httpGet"] == {"path": path, "port": "metrics"}, probe
    assert container["args"] == ["run"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_grace_period_covers_the_configured_drain(overlay: str, tmp_path: Path) -> None:
    pod = gateway_pod(overlay)
    drain_s = gateway_config(overlay, pod, tmp_path).limits.drain_timeout_s
    pre_stop = (
        pod.gateway.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds", 0)
    )
    expected = pre_stop + drain_s + CLOSE_MARGIN_S + APP_STOP_S.get(overlay, 0)
    assert pod.spec["terminationGracePeriodSeconds"] == expected
    # The drain time is the gateway's default, written out in the ConfigMap.
    assert drain_s == Config().limits.drain_timeout_s
    assert "drain_timeout_s" in one(documents(overlay), "ConfigMap")["data"]["streamgate.toml"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_images_are_this_version(overlay: str) -> None:
    for pod in pods(documents(overlay)):
        for container in pod.containers():
            assert container["image"] == f"streamgate:{__version__}", container["name"]


# --- configuration ----------------------------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_configmap_is_accepted_by_the_gateways_loader(overlay: str, tmp_path: Path) -> None:
    pod = gateway_pod(overlay)
    config = gateway_config(overlay, pod, tmp_path)
    raw = one(documents(overlay), "ConfigMap")["data"]["streamgate.toml"]
    path = tmp_path / "alone.toml"
    path.write_text(raw)
    assert load(path).host == "0.0.0.0"  # the file alone, too
    match overlay:
        case "standalone":
            # The embedded log is on the claim's volume, writable.
            assert config.backend.url == "embedded:/var/lib/streamgate"
            data = {m["name"]: m for m in pod.gateway["volumeMounts"]}["data"]
            assert data["mountPath"] == "/var/lib/streamgate" and not data.get("readOnly")
            assert config.advertised_host == f"streamgate.{NAMESPACE}.svc"
        case "proxy":
            assert config.backend.url == SECRETS[("streamgate", "backend-url")]
            assert config.advertised_host == f"streamgate.{NAMESPACE}.svc"
        case "sidecar":
            assert config.backend.url == SECRETS[("streamgate", "backend-url")]
            assert (config.host, config.advertised_host) == ("127.0.0.1", "127.0.0.1")
            assert config.admin.host == "0.0.0.0"
    if overlay != "sidecar":
        assert config.auth.root_password == SECRETS[("streamgate", "root-password")]


def test_service_links_would_stop_the_gateway(tmp_path: Path) -> None:
    """Why every pod sets enableServiceLinks: false. With a Service named streamgate the kubelet
    adds variables the gateway's loader refuses (unknown settings are errors)."""
    path = tmp_path / "streamgate.toml"
    path.write_text(one(documents("standalone"), "ConfigMap")["data"]["streamgate.toml"])
    links = {"STREAMGATE_PORT": "tcp://10.0.0.7:9092", "STREAMGATE_SERVICE_HOST": "10.0.0.7"}
    with pytest.raises(ConfigError, match="STREAMGATE_PORT"):
        load(path, environ=links)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_no_secret_in_arguments_or_literal_values(overlay: str) -> None:
    for pod in pods(documents(overlay)):
        for container in pod.containers():
            words = " ".join(container.get("command", []) + container.get("args", []))
            assert "@" not in words and "password" not in words.lower(), container["name"]
            for item in container.get("env", []):
                if "PASSWORD" in item["name"] or item["name"] in (
                    "STREAMGATE_BACKEND_URL", "STREAMGATE_AUTH_USERS"
                ):  # fmt: skip
                    assert "secretKeyRef" in item.get("valueFrom", {}), item


# --- per overlay ------------------------------------------------------------------------------


@pytest.mark.parametrize("overlay", ["standalone", "proxy"])
def test_the_service_carries_every_protocol_and_metrics(overlay: str, tmp_path: Path) -> None:
    docs = documents(overlay)
    service = one(docs, "Service")
    pod = gateway_pod(overlay)
    config = gateway_config(overlay, pod, tmp_path)
    selector = service["spec"]["selector"]
    assert selector.items() <= pod.labels.items()
    container_ports = {p["name"]: p["containerPort"] for p in pod.gateway["ports"]}
    service_ports = {p["name"]: p for p in service["spec"]["ports"]}
    assert set(service_ports) == set(PORT_NAMES) | {"metrics"}
    for name, port in service_ports.items():
        # Discovery answers carry the port a client connected to: Service port = container's.
        assert port["port"] == container_ports[name] and port["targetPort"] == name
        listener = PORT_NAMES.get(name)
        wanted = config.admin.port if listener is None else getattr(
            config.listeners, listener).port  # fmt: skip
        assert port["port"] == wanted, name
    # Clients are sent back to the Service: its name in the namespace.
    assert config.advertised_host == f"{service['metadata']['name']}.{NAMESPACE}.svc"
    pdb = one(docs, "PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod.labels.items()


def test_standalone_is_one_pod_with_its_own_volume() -> None:
    docs = documents("standalone")
    statefulset = one(docs, "StatefulSet")
    assert statefulset["spec"]["replicas"] == 1  # the embedded log has one owner
    (claim,) = statefulset["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    pod = gateway_pod("standalone")
    assert pod.gateway["lifecycle"]["preStop"]["sleep"]["seconds"] > 0


def test_proxy_replicas_take_the_broker_from_a_secret() -> None:
    deployment = one(documents("proxy"), "Deployment")
    assert deployment["spec"]["replicas"] >= 2
    env = {e["name"]: e for e in gateway_pod("proxy").gateway["env"]}
    assert env["STREAMGATE_BACKEND_URL"]["valueFrom"]["secretKeyRef"] == {
        "name": "streamgate", "key": "backend-url",
    }  # fmt: skip
    assert "volumeClaimTemplates" not in deployment["spec"]


def test_sidecar_is_native_and_its_application_uses_localhost(tmp_path: Path) -> None:
    docs = documents("sidecar")
    assert {d["kind"] for d in docs} == {"ConfigMap", "Deployment", "PodMonitor"}
    pod = gateway_pod("sidecar")
    (sidecar,) = pod.spec["initContainers"]
    assert sidecar["name"] == "streamgate" and sidecar["restartPolicy"] == "Always"
    assert "startupProbe" in sidecar  # the application starts once the gateway is up
    config = gateway_config("sidecar", pod, tmp_path)
    (app,) = pod.spec["containers"]
    env = container_env(app, namespace=NAMESPACE, secrets={})
    assert env["STREAMGATE_URL"] == f"kafka://127.0.0.1:{config.listeners.kafka.port}"
    # Only the admin port is the pod's business: the listeners are on loopback.
    assert [p["name"] for p in sidecar["ports"]] == ["metrics"]


# --- the Prometheus Operator's resources --------------------------------------------------------

# Field names of monitoring.coreos.com/v1 (the Prometheus Operator's API reference): the ones a
# ServiceMonitor / PodMonitor spec and an endpoint may have, as far as these manifests go.
MONITOR_SPEC = {
    "ServiceMonitor": {
        "endpoints", "selector", "namespaceSelector", "jobLabel", "targetLabels",
        "podTargetLabels", "sampleLimit", "targetLimit", "attachMetadata", "scrapeClass",
    },
    "PodMonitor": {
        "podMetricsEndpoints", "selector", "namespaceSelector", "jobLabel", "podTargetLabels",
        "sampleLimit", "targetLimit", "attachMetadata", "scrapeClass",
    },
}  # fmt: skip
ENDPOINT = {
    "port", "path", "scheme", "interval", "scrapeTimeout", "honorLabels", "honorTimestamps",
    "relabelings", "metricRelabelings", "params", "followRedirects", "enableHttp2",
}  # fmt: skip
DURATION = re.compile(r"^(0|(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$")


def seconds(duration: str) -> float:
    assert DURATION.match(duration), duration
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    return sum(float(n) * units[u] for n, u in re.findall(r"([0-9]+)(ms|h|m|s)", duration))


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_monitor_scrapes_the_gateways_metrics(overlay: str) -> None:
    docs = documents(overlay)
    kind = MONITORS[overlay]
    monitor = one(docs, kind)
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert set(monitor) == {"apiVersion", "kind", "metadata", "spec"}
    spec = monitor["spec"]
    assert set(spec) <= MONITOR_SPEC[kind], set(spec) - MONITOR_SPEC[kind]
    selector = spec["selector"]
    assert set(selector) == {"matchLabels"}
    if kind == "ServiceMonitor":
        service = one(docs, "Service")
        assert selector["matchLabels"].items() <= service["metadata"]["labels"].items()
        ports = {p["name"] for p in service["spec"]["ports"]}
        endpoints = spec["endpoints"]
    else:
        (pod,) = [p for p in pods(docs) if selector["matchLabels"].items() <= p.labels.items()]
        ports = {p["name"] for c in pod.containers() for p in c.get("ports", [])}
        endpoints = spec["podMetricsEndpoints"]
    assert endpoints
    for endpoint in endpoints:
        assert set(endpoint) <= ENDPOINT, set(endpoint) - ENDPOINT
        assert endpoint["port"] == "metrics" and endpoint["port"] in ports
        assert endpoint["path"] == "/metrics"
        assert seconds(endpoint["scrapeTimeout"]) <= seconds(endpoint["interval"])
