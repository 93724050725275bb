"""Every cached side environment the test suite runs real libraries in, built several at once.

The tests build each environment on first use (cached under `cache_dir()`, keyed by its pins);
`python -m rigs.side_envs` from tests/ (`make side-envs`, part of `make test`) builds the
missing ones up front, in parallel, so a fresh machine pays the installs once and side by side.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from concurrent import futures
from pathlib import Path

from rigs import conventions, phoenix, python_frameworks, unseen
from rigs.agents import reach_agents
from rigs.venvs import pinned_venv

# Google ADK and Strands Agents share one venv: ADK caps the OpenTelemetry SDK at 1.44, which
# Strands accepts.
ADK_STRANDS_REQUIREMENTS: tuple[str, ...] = (
    "google-adk==2.13.0",
    "strands-agents==1.62.0",
    "opentelemetry-api==1.44.0",
    "opentelemetry-sdk==1.44.0",
    "opentelemetry-exporter-otlp-proto-http==1.44.0",
    "opentelemetry-exporter-otlp-proto-grpc==1.44.0",
)


def reach_agents_venv() -> Path:
    """The OpenAI Agents SDK with its OpenInference and logfire instrumentations."""
    return pinned_venv("reach-agents-venv", reach_agents.REQUIREMENTS)


def adk_strands_venv() -> Path:
    """Google ADK and Strands Agents."""
    return pinned_venv("adk-strands-venv", ADK_STRANDS_REQUIREMENTS)


BUILDERS: dict[str, Callable[[], Path]] = {
    "conventions venv": conventions.conventions_venv,
    "conventions npm folder": conventions.conventions_node_prefix,
    "OpenAI Agents SDK venv": reach_agents_venv,
    "Google ADK and Strands venv": adk_strands_venv,
    "LangChain, LangGraph, LlamaIndex and CrewAI venv": python_frameworks.python_frameworks_venv,
    "Phoenix venv": phoenix.phoenix_venv,
    "smolagents, Haystack, MLflow and AutoGen venv": unseen.unseen_venv,
}


def main() -> int:
    """Build the missing environments, 3 at a time; exit 1 naming any that failed."""
    started = time.monotonic()
    failed: list[str] = []
    with futures.ThreadPoolExecutor(max_workers=3) as pool:
        running = {pool.submit(build): name for name, build in BUILDERS.items()}
        for done in futures.as_completed(running):
            name = running[done]
            try:
                done.result()
            except Exception as exc:  # noqa: BLE001 - reported, the others go on
                failed.append(name)
                print(f"side environment {name}: {exc}", file=sys.stderr)
    print(f"side environments ready in {time.monotonic() - started:.0f}s"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
