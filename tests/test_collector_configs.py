"""collector_config/: every config is valid YAML, fully defined, uses real contrib components, and is connected."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

CONFIG_DIR = Path(__file__).resolve().parent.parent / "collector_config"
COMPONENTS = yaml.safe_load((CONFIG_DIR / "components.yaml").read_text())
KINDS = ("receivers", "processors", "exporters", "extensions", "connectors")
CONFIGS = sorted(path for path in CONFIG_DIR.glob("*.yaml") if path.name != "components.yaml")


def _type(component_id: str) -> str:
    """`otlp/jaeger` -> `otlp` (a component id is type[/name])."""
    return component_id.split("/", 1)[0]


def config_problems(config: dict[str, Any], known: dict[str, Any]) -> list[str]:
    """Everything wrong with one collector config; empty when it is sound."""
    problems: list[str] = []
    defined = {kind: set((config.get(kind) or {}).keys()) for kind in KINDS}
    for kind in KINDS:
        for component_id in sorted(defined[kind]):
            if _type(component_id) not in set(known[kind]):
                problems.append(
                    f"{kind[:-1]} type {_type(component_id)!r} is not in otelcol-contrib"
                )
    service = config.get("service") or {}
    for extension in service.get("extensions") or []:
        if extension not in defined["extensions"]:
            problems.append(f"service extension {extension!r} is not defined")
    pipelines = service.get("pipelines") or {}
    if not pipelines:
        problems.append("no pipelines")
    connectors_in: set[str] = set()
    connectors_out: set[str] = set()
    for name, pipeline in pipelines.items():
        if _type(name) not in ("traces", "metrics", "logs"):
            problems.append(f"pipeline {name!r} has an unknown signal")
        receivers = pipeline.get("receivers") or []
        exporters = pipeline.get("exporters") or []
        if not receivers:
            problems.append(f"pipeline {name!r} has no receivers")
        if not exporters:
            problems.append(f"pipeline {name!r} has no exporters")
        for role, ids, kind in (
            ("receiver", receivers, "receivers"),
            ("processor", pipeline.get("processors") or [], "processors"),
            ("exporter", exporters, "exporters"),
        ):
            for component_id in ids:
                if component_id in defined["connectors"] and kind != "processors":
                    (connectors_in if role == "exporter" else connectors_out).add(component_id)
                elif component_id not in defined[kind]:
                    problems.append(f"pipeline {name!r} uses undefined {role} {component_id!r}")
    for connector in sorted(defined["connectors"]):
        if connector not in connectors_in or connector not in connectors_out:
            problems.append(
                f"connector {connector!r} must be an exporter of one pipeline and a receiver of another"
            )
    return problems


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_collector_config_is_sound(path: Path) -> None:
    config = yaml.safe_load(path.read_text())
    assert isinstance(config, dict)
    assert config_problems(config, COMPONENTS) == []


def test_all_promised_configs_exist() -> None:
    names = {path.name for path in CONFIGS}
    expected = {"debug.yaml", "jaeger-tempo.yaml", "phoenix.yaml", "vendor-otlphttp.yaml"}
    assert expected | {"tail-sampling.yaml", "production.yaml"} <= names


def test_tail_sampling_keeps_low_scores_and_evaluation_errors() -> None:
    policies = yaml.safe_load((CONFIG_DIR / "tail-sampling.yaml").read_text())["processors"][
        "tail_sampling"
    ]["policies"]
    conditions = [
        c
        for p in policies
        if p["type"] == "ottl_condition"
        for c in p["ottl_condition"]["spanevent"]
    ]
    assert any("gen_ai.evaluation.score.value" in c and "<" in c for c in conditions)
    assert any("error.type" in c for c in conditions)
    assert any("tracescore.evaluation.unscored" in c for c in conditions)


def test_production_config_bounds_memory_and_retries() -> None:
    config = yaml.safe_load((CONFIG_DIR / "production.yaml").read_text())
    for pipeline in config["service"]["pipelines"].values():
        assert pipeline["processors"][0] == "memory_limiter"  # first, so it can refuse data early
        assert pipeline["processors"][-1] == "batch"
    backend = config["exporters"]["otlp/backend"]
    assert backend["retry_on_failure"]["enabled"] and backend["sending_queue"]["enabled"]


def test_vendor_keys_come_from_the_environment() -> None:
    exporters = yaml.safe_load((CONFIG_DIR / "vendor-otlphttp.yaml").read_text())["exporters"]
    headers = [value for exporter in exporters.values() for value in exporter["headers"].values()]
    assert headers and all("${env:" in value for value in headers)


BROKEN = {
    "receivers": {"otlp": {}},
    "processors": {"batchy": {}},
    "exporters": {"debug": {}},
    "connectors": {"spanmetrics": {}},
    "service": {
        "extensions": ["health_check"],
        "pipelines": {
            "traces": {
                "receivers": ["otlp"],
                "processors": ["batchy", "memory_limiter"],
                "exporters": ["spanmetrics"],
            },
            "logs": {"receivers": ["otlp"], "exporters": []},
        },
    },
}


def test_checker_reports_each_kind_of_mistake() -> None:
    problems = config_problems(BROKEN, COMPONENTS)
    assert "processor type 'batchy' is not in otelcol-contrib" in problems
    assert "service extension 'health_check' is not defined" in problems
    assert "pipeline 'traces' uses undefined processor 'memory_limiter'" in problems
    assert "pipeline 'logs' has no exporters" in problems
    assert any("connector 'spanmetrics'" in p for p in problems)
