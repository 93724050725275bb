"""Spans made by the real instrumentation libraries of other conventions, for tests and benchmarks.

`convention_spans("openinference", cases)` runs one agent call per case through that library
(OpenTelemetry's GenAI util, OpenInference, OpenLLMetry / traceloop, pydantic-ai) in a side venv,
or through the Vercel AI SDK under node in an npm folder, both under the tracescore cache
(created on first use, keyed by the pinned versions, shared by every checkout), and returns the
spans it exported, decoded from the OTLP JSON lines written by the library's exporter.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rigs.venvs import pinned_venv
from tracescore.testing._decode import ReceivedSpan, spans_from_otlp_json
from tracescore.testing._tools import _file_lock, cache_dir

# traceloop-sdk with the OpenTelemetry pins it resolves with on PyPI (its instrumentation extras
# pin the OpenTelemetry betas, so the SDK is pinned to match them); the peer benchmark uses it too.
TRACELOOP_REQUIREMENTS: tuple[str, ...] = (
    "traceloop-sdk==0.62.4",
    "opentelemetry-api==1.45.1",
    "opentelemetry-sdk==1.45.1",
    "opentelemetry-semantic-conventions==0.66b1",
    "opentelemetry-instrumentation==0.66b1",
    "opentelemetry-exporter-otlp-proto-http==1.45.1",
    "opentelemetry-exporter-otlp-proto-grpc==1.45.1",
    "httpx>=0.27",  # imported by traceloop.sdk but not declared by it
)
# One venv for all three libraries: these pins resolve together.
REQUIREMENTS: tuple[str, ...] = (
    "openinference-instrumentation==0.1.72",
    "pydantic-ai-slim==2.68.0",
    "opentelemetry-util-genai==1.3b0",
    *TRACELOOP_REQUIREMENTS,
)
# The TypeScript frameworks, run by node from one npm folder: the Vercel AI SDK 7 with its
# OpenTelemetry integration, AI SDK 4, 5 and 6 under npm aliases (their own `experimental_telemetry`),
# and Mastra (agent, tools, workflows, thread memory) with its observability and OpenTelemetry exporter
# (the OTLP exporters and grpc-js are its peers; @mastra/core matches tests/mastra).
NODE_PACKAGES: dict[str, str] = {
    "ai": "7.0.173",
    "@ai-sdk/otel": "1.0.173",
    "ai-v4": "npm:ai@4.3.19",
    "ai-v5": "npm:ai@5.0.277",
    "ai-v6": "npm:ai@6.0.325",
    "zod": "3.25.76",
    "@mastra/core": "1.71.0",
    "@mastra/observability": "1.17.9",
    "@mastra/otel-exporter": "1.4.0",
    "@mastra/memory": "1.31.0",
    "@grpc/grpc-js": "1.14.7",
    "@opentelemetry/api": "1.9.1",
    "@opentelemetry/sdk-trace-base": "2.12.1",
    "@opentelemetry/context-async-hooks": "2.12.1",
    "@opentelemetry/resources": "2.12.1",
    "@opentelemetry/exporter-trace-otlp-grpc": "0.218.0",
    "@opentelemetry/exporter-trace-otlp-http": "0.218.0",
    "@opentelemetry/exporter-trace-otlp-proto": "0.218.0",
    "@opentelemetry/exporter-logs-otlp-grpc": "0.218.0",
    "@opentelemetry/exporter-logs-otlp-http": "0.218.0",
    "@opentelemetry/exporter-logs-otlp-proto": "0.218.0",
    "@opentelemetry/exporter-zipkin": "2.12.1",
}
# node runs of agents/convention_agent.mjs; more runs there (AI SDK 4, 5, 7 legacy, Mastra workflows and
# memory) are exercised through the gateway by tests/e2e/test_reach_node.py
NODE_CONVENTIONS: tuple[str, ...] = ("vercel_ai", "vercel_ai_v6", "mastra")
CONVENTIONS: tuple[str, ...] = (
    "genai", "openinference", "traceloop", "pydantic_ai", "pydantic_ai_v2", "pydantic_ai_history",
    *NODE_CONVENTIONS,
)
# more runs of the side venv's libraries, with cases of their own (tests/e2e/test_reach_python_runs.py)
MORE_RUNS: tuple[str, ...] = ("pydantic_ai_tools", "genai_workflow", "traceloop_tools")
# agent calls that are the turns of conversations (cases with the same "thread"): Mastra's memory
CONVERSATIONS: tuple[str, ...] = ("mastra_memory",)
_AGENT_SCRIPT = Path(__file__).parent / "agents" / "convention_agent.py"
_NODE_AGENT_SCRIPT = _AGENT_SCRIPT.with_suffix(".mjs")
_READY = ".tracescore-ready"


def conventions_venv() -> Path:
    """The cached venv holding the convention libraries (installed on first use; minutes)."""
    return pinned_venv("conventions-venv", REQUIREMENTS)


def conventions_node_prefix() -> Path:
    """The cached npm folder holding `NODE_PACKAGES` (installed on first use with npm)."""
    pins = json.dumps(NODE_PACKAGES, sort_keys=True)
    prefix = cache_dir() / f"conventions-node-{hashlib.sha256(pins.encode()).hexdigest()[:12]}"
    with _file_lock(cache_dir() / f"{prefix.name}.lock"):
        if not (prefix / _READY).exists():
            shutil.rmtree(prefix, ignore_errors=True)
            prefix.mkdir(parents=True)
            (prefix / "package.json").write_text(json.dumps(
                {"name": "tracescore-conventions", "private": True, "dependencies": NODE_PACKAGES}))
            done = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error"],
                                  cwd=prefix, check=False, capture_output=True, text=True,
                                  timeout=900)
            if done.returncode != 0:
                raise RuntimeError(f"npm install failed in {prefix}:\n{done.stderr[-4000:]}")
            (prefix / _READY).write_text(pins + "\n")
    return prefix


def export_convention(convention: str, cases: Sequence[Mapping[str, Any]], out: Path, *,
                      timeout_s: float = 300.0) -> Path:
    """Run one agent call per case (`{"question", "answer", "ground_truth"?}`) through the real
    library of `convention`; its spans are appended to `out` as OTLP JSON lines."""
    if convention not in CONVENTIONS + MORE_RUNS + CONVERSATIONS:
        raise ValueError(f"unknown convention {convention!r}; known: {', '.join(CONVENTIONS)}")
    if convention in NODE_CONVENTIONS + CONVERSATIONS:
        prefix = conventions_node_prefix()
        command = ["node", str(_NODE_AGENT_SCRIPT)]
        env = {**os.environ, "TRACESCORE_NODE_PREFIX": str(prefix)}
    else:
        command = [str(conventions_venv() / "bin" / "python"), str(_AGENT_SCRIPT)]
        env = None
    with tempfile.TemporaryDirectory(prefix="tracescore-conventions-") as tmp:
        cases_file = Path(tmp) / "cases.json"
        cases_file.write_text(json.dumps(list(map(dict, cases))), encoding="utf-8")
        done = subprocess.run(
            [*command, convention, str(cases_file), str(out.absolute())],
            check=False, capture_output=True, text=True, timeout=timeout_s, cwd=tmp, env=env,
        )
    if done.returncode != 0:
        raise RuntimeError(f"{convention} agent failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return out


def convention_spans(convention: str, cases: Sequence[Mapping[str, Any]], *,
                     timeout_s: float = 300.0) -> list[ReceivedSpan]:
    """Every span the real library of `convention` exported for one agent call per case,
    in export order."""
    with tempfile.TemporaryDirectory(prefix="tracescore-conventions-") as tmp:
        out = export_convention(convention, cases, Path(tmp) / "spans.jsonl", timeout_s=timeout_s)
        lines = out.read_text(encoding="utf-8").splitlines() if out.exists() else []
    return [span for line in lines if line.strip() for span in spans_from_otlp_json(line)]
