"""Real agent libraries the project was never written for (smolagents with OpenInference, Haystack
with its own OpenTelemetry tracer, MLflow tracing, AutoGen AgentChat with its own OpenTelemetry
tracing), in one cached side venv; the runner is
`agents/unseen_agents.py`. They prove that an agent from a framework nobody told us about is found
by the shape of its trace and read from wherever it puts its content."""

from __future__ import annotations

from pathlib import Path

from rigs.venvs import pinned_venv

REQUIREMENTS: tuple[str, ...] = (
    "smolagents==1.26.0",
    "openinference-instrumentation-smolagents==0.1.43",
    "openinference-instrumentation==0.1.72",
    "haystack-ai==3.4.1",
    "opentelemetry-haystack==2.0.0",
    "mlflow-tracing==3.17.2",
    "autogen-agentchat==0.7.5",
    "autogen-core==0.7.5",
    "autogen-ext[openai]==0.7.5",
    "opentelemetry-instrumentation-openai-v2==2.4b0",
    "opentelemetry-util-genai==1.0b0",  # the newest the OpenAI instrumentation imports from
    "opentelemetry-api==1.45.2",
    "opentelemetry-sdk==1.45.2",
    "opentelemetry-exporter-otlp-proto-http==1.45.2",
)
RUNNER = Path(__file__).parent / "agents" / "unseen_agents.py"


def unseen_venv() -> Path:
    """The cached venv with `REQUIREMENTS` (installed on first use; minutes)."""
    return pinned_venv("unseen-venv", REQUIREMENTS)
