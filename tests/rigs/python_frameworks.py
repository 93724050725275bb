"""The cached side venv holding real Python agent frameworks and their instrumentations, for the
reach tests (`tests/e2e/test_reach_python_frameworks.py`); `agents/reach_lc.py` runs inside it."""

from __future__ import annotations

from pathlib import Path

from rigs.venvs import pinned_venv

# One venv for the slice: LangChain / LangGraph with both instrumentations (OpenInference and
# OpenLLMetry's), LlamaIndex and CrewAI with OpenInference's; these pins resolve together
# (the OpenTelemetry pins are the ones they resolve to).
REQUIREMENTS: tuple[str, ...] = (
    "langchain==1.5.0",
    "langchain-core==1.8.1",
    "langgraph==1.2.22",
    "langgraph-prebuilt==1.1.3",
    "llama-index-core==0.14.25",
    "crewai==1.15.30",
    "openinference-instrumentation==0.1.72",
    "openinference-instrumentation-langchain==0.1.80",
    "openinference-instrumentation-llama-index==4.6.1",
    "openinference-instrumentation-crewai==1.1.21",
    "opentelemetry-instrumentation-langchain==0.62.4",
    "opentelemetry-api==1.45.2",
    "opentelemetry-sdk==1.45.2",
    "opentelemetry-exporter-otlp-proto-http==1.45.2",
    "opentelemetry-exporter-otlp-proto-common==1.45.2",
)
RUNNER = Path(__file__).parent / "agents" / "reach_lc.py"


def python_frameworks_venv() -> Path:
    """The cached venv with `REQUIREMENTS` (installed on first use; minutes)."""
    return pinned_venv("python-frameworks-venv", REQUIREMENTS)
