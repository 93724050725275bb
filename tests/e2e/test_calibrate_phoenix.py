"""Labels people gave in a real Arize Phoenix (human span annotations written through its REST API)
read back as a calibration dataset by `tracescore calibrate --phoenix`.

Phoenix runs from its cached venv on free loopback ports (see tests/e2e/test_phoenix_e2e.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from rigs.phoenix import PhoenixServer

PROJECT = "support-bot"
SCRIPT = Path(sys.executable).parent / "tracescore"
CALLS = [  # question, answer, the people's label (None: not labelled), an LLM annotator's label
    ("What is the capital of France?", "Paris is the capital of France.", "relevant", None),
    ("What is the tallest mountain?", "I like turtles.", "irrelevant", "relevant"),
    ("How long does shipping take?", "We ship to over 40 countries.", "partial", None),
    ("Who wrote Hamlet?", "William Shakespeare wrote Hamlet.", None, "relevant"),
]


def _send_agent_calls(phoenix: PhoenixServer) -> list[str]:
    """The CALLS as GenAI `invoke_agent` spans over OTLP/HTTP; their span ids."""
    provider = TracerProvider(resource=Resource.create({"openinference.project.name": PROJECT}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=phoenix.traces_url)))
    tracer, ids = provider.get_tracer("test"), []
    for question, answer, _, _ in CALLS:
        attributes = {
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support",
            "gen_ai.input.messages": json.dumps(
                [{"role": "user", "parts": [{"type": "text", "content": question}]}]),
            "gen_ai.output.messages": json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": answer}]}]),
        }
        with tracer.start_as_current_span("invoke_agent support", attributes=attributes) as span:
            ids.append(format(span.get_span_context().span_id, "016x"))
    provider.shutdown()
    return ids


def _wait_for_spans(phoenix: PhoenixServer, count: int, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if len(phoenix.get_json(f"/v1/projects/{PROJECT}/spans")["data"]) >= count:
                return
        except urllib.error.HTTPError as exc:
            if exc.code != 404:  # the project exists from its first span on
                raise
        time.sleep(0.5)  # an external server: nothing to wait on but its API
    raise TimeoutError(f"Phoenix has not stored {count} spans after {timeout}s")


def _annotate(phoenix: PhoenixServer, ids: list[str]) -> None:
    """The people's labels (HUMAN) and an LLM annotator's, through Phoenix's REST API."""
    data = []
    for span_id, (_, _, human, llm) in zip(ids, CALLS):
        if human is not None:
            data.append({"span_id": span_id, "name": "relevance", "annotator_kind": "HUMAN",
                         "result": {"label": human, "explanation": "a reviewer's label"}})
        if llm is not None:
            data.append({"span_id": span_id, "name": "relevance", "annotator_kind": "LLM",
                         "identifier": "llm", "result": {"label": llm}})
    request = urllib.request.Request(
        f"{phoenix.base_url}/v1/span_annotations?sync=true", method="POST",
        data=json.dumps({"data": data}).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 200


@pytest.mark.slow
@pytest.mark.timeout(1200)  # the first run installs Phoenix into the cache
def test_human_annotations_in_phoenix_are_a_calibration_dataset(phoenix: PhoenixServer) -> None:
    ids = _send_agent_calls(phoenix)
    _wait_for_spans(phoenix, len(CALLS))
    _annotate(phoenix, ids)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRACESCORE_"))}
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    result = subprocess.run(
        [str(SCRIPT), "calibrate", "--phoenix", phoenix.base_url, "--project", PROJECT,
         "--annotation", "relevance", "-s", "relevancy", "--json", "-", "--resamples", "0"],
        env=env, text=True, capture_output=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["labels"]["categories"] == ["relevant", "partial", "irrelevant"]
    rows = {row["input"]: row for row in report["rows"]}
    # only the people's labels count: the LLM annotator's are left out, the unlabelled call too
    assert {q: (row["output"], row["human_label"]) for q, row in rows.items()} == {
        q: (a, human) for q, a, human, _ in CALLS if human is not None}

    wrong = subprocess.run(
        [str(SCRIPT), "calibrate", "--phoenix", phoenix.base_url, "--project", PROJECT,
         "--annotation", "helpfulness", "-s", "relevancy"],
        env=env, text=True, capture_output=True, timeout=300, check=False)
    assert wrong.returncode == 2
    assert "no agent call with a human annotation 'helpfulness'" in wrong.stderr
