"""collector_config/: every shipped config passes the real collector's `validate` and starts for real.

The collector is the project's own build (collector/builder-config.yaml), built into the cache on
first use. `validate` replaces the structural checker this file used to carry: it knows every
component's real config schema, which a component list never did.
"""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracescore.online._conversations import ID_ATTRIBUTES
from tracescore.testing._collector import OTelCollector, validate_config
from tracescore.testing._collector import main as collector_main
from tracescore.testing._tools import free_port

CONFIG_DIR = Path(__file__).resolve().parents[2] / "collector_config"
CONFIGS = sorted(CONFIG_DIR.glob("*.yaml"))

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # the first test may build the collector


def _load(path: Path) -> dict[str, Any]:
    config = yaml.safe_load(path.read_text())
    assert isinstance(config, dict)
    return config


def loopback_overrides(config: dict[str, Any], tmp_path: Path) -> dict[str, str]:
    """`--set` values that put every listener of `config` on a free loopback port and every file
    it writes under tmp_path, so the config runs here unchanged otherwise."""
    overrides: dict[str, str] = {}
    for receiver, settings in (config.get("receivers") or {}).items():
        for protocol in ((settings or {}).get("protocols") or {}) if receiver.split("/")[0] == "otlp" else ():
            key = f"receivers::{receiver}::protocols::{protocol}::endpoint"
            overrides[key] = f"127.0.0.1:{free_port()}"
    for extension in config.get("extensions") or {}:
        kind = extension.split("/")[0]
        if kind == "health_check":
            overrides[f"extensions::{extension}::endpoint"] = f"127.0.0.1:{free_port()}"
        elif kind == "file_storage":
            overrides[f"extensions::{extension}::directory"] = str(tmp_path / "storage")
    for exporter in config.get("exporters") or {}:
        if exporter.split("/")[0] == "file":
            overrides[f"exporters::{exporter}::path"] = str(tmp_path / f"{exporter.replace('/', '-')}.jsonl")
        elif exporter.split("/")[0] == "prometheus":
            overrides[f"exporters::{exporter}::endpoint"] = f"127.0.0.1:{free_port()}"
    return overrides


def test_every_promised_config_is_shipped() -> None:
    names = {path.name for path in CONFIGS}
    assert {
        "debug.yaml", "jaeger-tempo.yaml", "phoenix.yaml", "vendor-otlphttp.yaml",
        "tail-sampling.yaml", "production.yaml",
        "gateway.yaml", "gateway-loadbalancing.yaml", "gateway-tail-sampling.yaml", "archive.yaml",
        "gateway-fleet.yaml",
    } <= names  # fmt: skip


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_config_passes_collector_validate(path: Path) -> None:
    result = validate_config(path)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_config_starts_and_stops_cleanly(path: Path, tmp_path: Path) -> None:
    overrides = loopback_overrides(_load(path), tmp_path)
    ports = [int(value.rsplit(":", 1)[1]) for key, value in overrides.items() if key.endswith("endpoint")]
    collector = OTelCollector(path, overrides=overrides, otlp_receiver=False, ready_ports=ports)
    http = next(v for k, v in overrides.items() if k.startswith("receivers::otlp::") and "::http::" in k)
    with collector:
        assert _post_one_span(f"http://{http}/v1/traces") == 200  # it takes data
        log = collector.log()
    assert collector.returncode == 0, log  # and drains and exits cleanly on SIGTERM
    assert "Everything is ready" in log
    # the pinned collector's current component names: no "alias is deprecated" warning
    assert [line for line in log.splitlines() if "deprecated" in line.lower()] == []


def _post_one_span(url: str) -> int:
    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add(name="smoke")
    span.trace_id, span.span_id = bytes(range(1, 17)), bytes(range(1, 9))
    post = urllib.request.Request(url, data=request.SerializeToString(),
                                  headers={"Content-Type": "application/x-protobuf"})
    with urllib.request.urlopen(post, timeout=30) as response:
        return int(response.status)


_OTLP_IN: dict[str, Any] = {"otlp": {"protocols": {"grpc": {}}}}


def _broken(processors: dict[str, Any], pipeline: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"receivers": _OTLP_IN, "processors": processors, "exporters": {"debug": {}},
            "service": {"pipelines": {"traces": {"receivers": ["otlp"], **pipeline}}}, **top}


BROKEN_CONFIGS = {  # a config with one mistake -> a word validate's message must name
    "unknown processor type": (
        _broken({"batchy": {}}, {"processors": ["batchy"], "exporters": ["debug"]}), "batchy"),
    "undefined extension": (
        _broken({}, {"exporters": ["debug"]}), "health_check"),
    "pipeline without exporters": (
        _broken({}, {"exporters": []}), "exporter"),
    "misspelt field": (
        _broken({"tail_sampling": {"decision_wiat": "10s"}},
                {"processors": ["tail_sampling"], "exporters": ["debug"]}), "decision_wiat"),
    "bad OTTL condition": (
        _broken({"filter": {"traces": {"span": ['attributes["x" == 1']}}},
                {"processors": ["filter"], "exporters": ["debug"]}), "filter"),
}
BROKEN_CONFIGS["undefined extension"][0]["service"]["extensions"] = ["health_check"]


@pytest.mark.parametrize("name", sorted(BROKEN_CONFIGS))
def test_validate_rejects_a_broken_config(name: str, tmp_path: Path) -> None:
    config, names = BROKEN_CONFIGS[name]
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(config))
    result = validate_config(path)
    assert result.returncode != 0
    assert names in result.stdout + result.stderr


# What validate cannot know: the configs say what their comments promise.


def test_tail_sampling_keeps_low_scores_and_evaluation_errors() -> None:
    for name in ("tail-sampling.yaml", "gateway-tail-sampling.yaml"):
        policies = _load(CONFIG_DIR / name)["processors"]["tail_sampling"]["policies"]
        conditions = [
            c for p in policies if p["type"] == "ottl_condition" for c in p["ottl_condition"]["spanevent"]
        ]
        assert any("gen_ai.evaluation.score.value" in c and "<" in c for c in conditions), name
        assert any("error.type" in c for c in conditions), name
        assert any("tracescore.evaluation.unscored" in c for c in conditions), name


def test_production_config_bounds_memory_and_retries() -> None:
    config = _load(CONFIG_DIR / "production.yaml")
    for pipeline in config["service"]["pipelines"].values():
        assert pipeline["processors"][0] == "memory_limiter"  # first, so it can refuse data early
        assert pipeline["processors"][-1] == "batch"
    backend = config["exporters"]["otlp_grpc/backend"]
    assert backend["retry_on_failure"]["enabled"] and backend["sending_queue"]["enabled"]


def test_vendor_keys_come_from_the_environment() -> None:
    exporters = _load(CONFIG_DIR / "vendor-otlphttp.yaml")["exporters"]
    headers = [value for exporter in exporters.values() for value in exporter["headers"].values()]
    assert headers and all("${env:" in value for value in headers)


def test_loadbalancing_routes_whole_traces() -> None:
    for name in ("gateway-loadbalancing.yaml", "gateway-tail-sampling.yaml", "gateway-fleet.yaml"):
        exporter = _load(CONFIG_DIR / name)["exporters"]["load_balancing"]
        assert exporter["routing_key"] == "traceID", name  # a trace's spans meet on one replica
        assert len(exporter["resolver"]["static"]["hostnames"]) >= 2, name


def test_fleet_routes_every_span_by_trace_and_turns_by_conversation() -> None:
    """Tier 1 gets every span by trace id; tier 2 only the spans with the key it routes by."""
    config = _load(CONFIG_DIR / "gateway-fleet.yaml")
    pipelines = config["service"]["pipelines"]
    assert pipelines["traces"]["exporters"] == ["load_balancing"]
    assert pipelines["traces"]["processors"] == ["memory_limiter"]  # nothing dropped or changed
    conversations = config["exporters"]["load_balancing/conversations"]
    assert conversations["routing_key"] == "attributes"
    (key,) = conversations["routing_attributes"]
    processors = pipelines["traces/conversations"]["processors"]
    assert processors[-1].startswith("filter/")  # keeps only spans with the key
    assert f'attributes["{key}"] == nil' in config["processors"][processors[-1]]["traces"]["span"][0]
    statements = config["processors"]["transform/conversation-id"]["trace_statements"][0]["statements"]
    read = [re.findall(r'attributes\["([^"]+)"\]', statement)[1] for statement in statements]
    assert read[::-1] == list(ID_ATTRIBUTES)  # the gateway's conversation ids, in its order
    assert all(statement.startswith(f'set(attributes["{key}"], ') for statement in statements)


GATEWAY_CONFIGS = ("gateway.yaml", "gateway-loadbalancing.yaml", "gateway-tail-sampling.yaml",
                   "gateway-fleet.yaml")


def test_gateway_configs_take_every_signal_on_every_receiver() -> None:
    """A replica sends its `log` sink's records and its metrics where it forwards spans, and apps
    send theirs to the main receiver: a receiver without a pipeline for a signal refuses it."""
    for name in GATEWAY_CONFIGS:
        config = _load(CONFIG_DIR / name)
        pipelines = config["service"]["pipelines"]
        for receiver in config["receivers"]:
            signals = {key.split("/")[0] for key, p in pipelines.items() if receiver in p["receivers"]}
            assert signals == {"traces", "logs", "metrics"}, (name, receiver)
        for key, pipeline in pipelines.items():
            if key == "logs/content":  # GenAI content records: to the scorers (docs/gateway.md, Logs)
                assert name == "gateway.yaml"  # one replica: the loadbalancing exporter routes
                assert pipeline["exporters"] == ["otlp_grpc/tracescore"]  # logs apart from spans
            elif key.split("/")[0] != "traces":
                assert pipeline["exporters"] == ["otlp_grpc/backend"], (name, key)  # not to the scorers


def test_gateway_yaml_routes_each_app_log_record_one_way() -> None:
    """The GenAI content records go through the gateway, every other record to the backend: the
    two filters drop complementary sets (one condition, negated)."""
    config = _load(CONFIG_DIR / "gateway.yaml")
    pipelines, processors = config["service"]["pipelines"], config["processors"]
    content = pipelines["logs/content"]["processors"][-1]
    rest = pipelines["logs"]["processors"][-1]
    assert pipelines["logs/content"]["receivers"] == pipelines["logs"]["receivers"] == ["otlp"]
    (keep_content,) = processors[content]["logs"]["log_record"]
    (keep_rest,) = processors[rest]["logs"]["log_record"]
    assert keep_content == "not " + keep_rest.replace(" or ", " and not ")
    for name in ("gen_ai.user.message", "gen_ai.system.message", "gen_ai.assistant.message",
                 "gen_ai.tool.message", "gen_ai.choice", "gen_ai.client.inference.operation.details"):
        pattern = re.search(r'IsMatch\(event_name, "([^"]+)"\)', keep_rest)
        assert pattern is not None and re.fullmatch(pattern.group(1).replace("\\\\", "\\"), name)
    assert 'attributes["event.name"]' in keep_rest  # as older SDKs name the event


def test_gateway_configs_acknowledge_only_what_an_exporter_queued() -> None:
    """A `batch` processor acknowledges before the exporter's queue has the data and drops what a
    full queue refuses; a retry with a time limit drops acknowledged data when it runs out."""
    for name in GATEWAY_CONFIGS:
        config = _load(CONFIG_DIR / name)
        pipelines = config["service"]["pipelines"].values()
        sampled = {e for p in pipelines if "tail_sampling" in p["processors"] for e in p["exporters"]}
        for pipeline in pipelines:
            if "tail_sampling" in pipeline["processors"]:
                continue  # it holds traces in memory until it decides: nothing to promise
            assert "batch" not in pipeline["processors"], name
            for exporter_name in set(pipeline["exporters"]) - sampled:  # that exporter promises nothing
                exporter = config["exporters"][exporter_name]
                exporter = exporter.get("protocol", {}).get("otlp", exporter)
                assert exporter["retry_on_failure"]["max_elapsed_time"] == 0, (name, exporter_name)
                assert exporter["sending_queue"]["enabled"], (name, exporter_name)


def test_validate_command_reports_each_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text(yaml.safe_dump(BROKEN_CONFIGS["unknown processor type"][0]))
    good = CONFIG_DIR / "debug.yaml"
    assert collector_main(["validate", str(good)]) == 0
    assert collector_main(["validate", str(good), str(broken)]) == 1
    out, err = capsys.readouterr()
    assert f"{good}: ok" in out and f"{broken}: INVALID" in out and "batchy" in err
