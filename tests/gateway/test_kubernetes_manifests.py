"""deploy/kubernetes/: every object decodes strictly into the official Kubernetes Go types
(k8s.io/api, by tests/go/k8scheck: an unknown field, a wrong type or a bad quantity fails), and
the pieces fit together: the gateway's config loads, Kubernetes never kills a drain, probes and
ports are the gateway's own, the collector's resolver finds the headless Service, the HPA scales
on a gauge the gateway serves, and the collector's config passes the real collector's
`validate`."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from rigs.native_agents import k8s_check

from tracescore.gateway import Gateway, load_gateway_config
from tracescore.testing._collector import validate_config

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # builds the checker (and collector)
DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
MANIFESTS = sorted(DEPLOY.glob("*.yaml"))


def _decoded() -> dict[tuple[str, str], dict[str, Any]]:
    done = subprocess.run([str(k8s_check()), *map(str, MANIFESTS)], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    objects = [json.loads(line) for line in done.stdout.splitlines()]
    return {(o["kind"], o["object"]["metadata"]["name"]): o["object"] for o in objects}


@pytest.fixture(scope="module")
def objects() -> dict[tuple[str, str], dict[str, Any]]:
    return _decoded()


def _port(address: str | None) -> int:
    assert address is not None
    return int(address.rsplit(":", 1)[1])


def test_every_object_decodes_into_the_kubernetes_types(
        objects: dict[tuple[str, str], dict[str, Any]]) -> None:
    assert {kind for kind, _ in objects} == {
        "ConfigMap", "Service", "Deployment", "PodDisruptionBudget", "HorizontalPodAutoscaler"}


@pytest.mark.parametrize("mutation, message", [
    (("terminationGracePeriodSeconds: 80", "terminationGracePeriodSecond: 80"), "unknown field"),
    (('requests: {cpu: "1", memory: 1Gi}', 'requests: {cpu: "1x", memory: 1Gi}'), "quantities"),
    (("maxUnavailable: 1\n", "maxUnavailable: 1\n  maxUnavailable: 2\n"), "already set"),
    (("matchLabels: {app.kubernetes.io/name: tracescore-gateway}\n  strategy",
      "matchLabels: {app.kubernetes.io/name: other}\n  strategy"), "selector"),
])
def test_the_checker_refuses_what_kubernetes_refuses(
        mutation: tuple[str, str], message: str, tmp_path: Path) -> None:
    text = (DEPLOY / "gateway.yaml").read_text()
    assert mutation[0] in text
    broken = tmp_path / "gateway.yaml"
    broken.write_text(text.replace(mutation[0], mutation[1], 1))
    done = subprocess.run([str(k8s_check()), str(broken)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 1 and message in done.stderr, done.stderr


def test_the_gateway_fits_its_deployment(objects: dict[tuple[str, str], dict[str, Any]],
                                         tmp_path: Path) -> None:
    config_file = tmp_path / "gateway.yaml"
    config_file.write_text(objects["ConfigMap", "tracescore-gateway"]["data"]["gateway.yaml"])
    config = load_gateway_config(config_file)
    deployment = objects["Deployment", "tracescore-gateway"]
    pod = deployment["spec"]["template"]["spec"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    (container,) = pod["containers"]
    # Kubernetes waits for the drain: SIGTERM scores what is held within shutdown_timeout_s
    # it keeps taking what the collector sends until the collector's dns resolver no longer
    # lists it (the collector drops what it holds for a replica it unlisted: test_collector_churn)
    wait_s = _seconds(container["lifecycle"]["preStop"]["exec"]["command"])
    collector = yaml.safe_load(objects["ConfigMap", "tracescore-collector"]["data"]["collector.yaml"])
    interval = collector["exporters"]["load_balancing"]["resolver"]["dns"]["interval"]
    assert wait_s > float(interval.removesuffix("s"))
    assert pod["terminationGracePeriodSeconds"] > wait_s + config.shutdown_timeout_s
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"otlp-grpc": _port(config.grpc_endpoint),
                     "otlp-http": _port(config.http_endpoint),
                     "health": _port(config.health_endpoint)}
    assert container["readinessProbe"]["httpGet"] == {"path": "/ready", "port": "health"}
    assert container["livenessProbe"]["httpGet"]["path"] == "/health"
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert Path(config.journal_path).parent == Path(mounts["journal"])
    assert container["args"][-1].startswith(mounts["config"])
    for name in ("tracescore-gateway", "tracescore-gateway-headless"):
        assert objects["Service", name]["spec"]["selector"] == labels
    headless = objects["Service", "tracescore-gateway-headless"]["spec"]
    assert headless["clusterIP"] == "None"
    assert [p["port"] for p in headless["ports"]] == [ports["otlp-grpc"]]
    budget = objects["PodDisruptionBudget", "tracescore-gateway"]["spec"]
    assert budget["selector"]["matchLabels"] == labels
    autoscaler = objects["HorizontalPodAutoscaler", "tracescore-gateway"]["spec"]
    assert budget["maxUnavailable"] < autoscaler["minReplicas"]
    assert autoscaler["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment",
                                            "name": "tracescore-gateway"}


def test_the_autoscaler_scales_on_a_gauge_the_gateway_serves(
        objects: dict[tuple[str, str], dict[str, Any]], tmp_path: Path) -> None:
    (metric,) = objects["HorizontalPodAutoscaler", "tracescore-gateway"]["spec"]["metrics"]
    name = metric["pods"]["metric"]["name"]
    adapter = yaml.safe_load(
        objects["ConfigMap", "tracescore-prometheus-adapter"]["data"]["config.yaml"])
    assert any(rule["seriesQuery"].startswith(name + "{") for rule in adapter["rules"])
    config_file = tmp_path / "gateway.yaml"
    config_file.write_text("scoring: {isolation: thread, scorers: [{scorer: similarity}]}\n")
    config = load_gateway_config(config_file, overrides={
        "receivers.grpc": "127.0.0.1:0", "receivers.http": "127.0.0.1:0",
        "receivers.health": "127.0.0.1:0", "journal.path": str(tmp_path / "j.db"),
        "exporter.endpoint": "http://127.0.0.1:9"})
    with Gateway(config) as gateway:
        served = gateway.prometheus()
    assert re.search(rf"^# TYPE {name} gauge$", served, re.MULTILINE), served


def test_the_collector_config_finds_the_replicas_and_passes_validate(
        objects: dict[tuple[str, str], dict[str, Any]], tmp_path: Path) -> None:
    text = objects["ConfigMap", "tracescore-collector"]["data"]["collector.yaml"]
    config = yaml.safe_load(text)
    resolver = config["exporters"]["load_balancing"]["resolver"]["dns"]
    assert resolver["hostname"].split(".")[0] == "tracescore-gateway-headless"
    assert int(resolver["port"]) == objects["Service", "tracescore-gateway-headless"]["spec"][
        "ports"][0]["port"]
    gateway = yaml.safe_load(
        objects["ConfigMap", "tracescore-gateway"]["data"]["gateway.yaml"])
    assert gateway["exporter"]["endpoint"].endswith(
        ":" + config["receivers"]["otlp/scored"]["protocols"]["grpc"]["endpoint"].split(":")[1])
    path = tmp_path / "collector.yaml"
    path.write_text(text)
    result = validate_config(path, env={"BACKEND_OTLP_ENDPOINT": "127.0.0.1:4317"})
    assert result.returncode == 0, result.stdout + result.stderr


def _seconds(command: list[str]) -> float:
    """The seconds of a preStop `sleep N` command."""
    assert command[0] == "sleep", command
    return float(command[1])
