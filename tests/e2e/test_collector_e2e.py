"""End to end through the real OpenTelemetry Collector (the project's own build).

app (tracescore, online scoring in-process) -> collector -> loopback OTLP receiver, counting spans:
every span and every score event must arrive intact over gRPC and over HTTP, and the shipped
tail-sampling config must keep exactly the traces it promises to keep.
"""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _gateway_helpers import agent_trace, sender
from _helpers import GEO_ANSWER as ANSWER
from _helpers import geo_agent, geo_llm_and_judge, litellm_instrumented, shut_down_pipelines
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracescore
from tracescore import _semconv as sc
from tracescore.testing import OTLPReceiver, ReceivedSpan, StubLLMServer, spans_from_otlp_json
from tracescore.testing._collector import OTelCollector

CONFIG_DIR = Path(__file__).resolve().parents[2] / "collector_config"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # the first test may build the collector

PASS_THROUGH = """
receivers:
  otlp:
    protocols:
      grpc: {{}}
      http: {{}}
processors:
  memory_limiter: {{check_interval: 1s, limit_percentage: 80, spike_limit_percentage: 25}}
  batch: {{timeout: 200ms}}
exporters:
  {exporter}:
    endpoint: {endpoint}
    tls: {{insecure: true}}
service:
  pipelines:
    traces: {{receivers: [otlp], processors: [memory_limiter, batch], exporters: [{exporter}]}}
"""


@pytest.fixture(autouse=True)
def _clean_pipelines(span_exporter: InMemorySpanExporter) -> Iterator[None]:
    yield
    shut_down_pipelines()


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _as_sent(span: ReadableSpan) -> dict[str, Any]:
    context = span.get_span_context()
    assert context is not None
    return {
        "name": span.name,
        "trace_id": f"{context.trace_id:032x}",
        "parent_span_id": f"{span.parent.span_id:016x}" if span.parent else None,
        "attributes": {k: _plain(v) for k, v in (span.attributes or {}).items()},
        "events": [(e.name, {k: _plain(v) for k, v in (e.attributes or {}).items()}) for e in span.events],
        "status": span.status.status_code.name,
        "start": span.start_time,
        "end": span.end_time,
    }


def _as_received(span: ReceivedSpan) -> dict[str, Any]:
    return {
        "name": span.name,
        "trace_id": span.trace_id,
        "parent_span_id": span.parent_span_id,
        "attributes": span.attributes,
        "events": [(e.name, e.attributes) for e in span.events],
        "status": span.status_code,
        "start": span.start_time_unix_nano,
        "end": span.end_time_unix_nano,
    }


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_every_span_and_score_event_crosses_the_collector_intact(
    otlp_receiver: OTLPReceiver, stub_llm: StubLLMServer, protocol: str,
    otel_collector: Callable[..., OTelCollector],
) -> None:
    calls = 25
    exporter, downstream = (
        ("otlp_grpc", otlp_receiver.grpc_address) if protocol == "grpc"
        else ("otlp_http", otlp_receiver.http_endpoint)
    )  # fmt: skip
    sent = InMemorySpanExporter()
    collector = otel_collector(PASS_THROUGH.format(exporter=exporter, endpoint=downstream))
    geo = geo_agent(stub_llm)
    stub_llm.responder = geo_llm_and_judge
    relevancy = tracescore.create_answer_relevancy_scorer(
        model="openai/judge", api_base=stub_llm.base_url, api_key="sk-test"
    )
    handle = tracescore.configure(
        exporter=[f"otlp-{protocol}", sent],
        endpoint=collector.grpc_endpoint if protocol == "grpc" else collector.http_endpoint,
        scorers=[relevancy],
        online={"max_wait_s": 60},
    )
    with litellm_instrumented():
        for i in range(calls):
            assert geo(f"What is the capital of France? ({i})") == ANSWER
    assert handle.flush(60)
    received = otlp_receiver.wait_for_spans(3 * calls, timeout=60)

    assert {s.protocol for s in received} == {protocol}
    assert all(r.headers.get("user-agent", "").startswith("OpenTelemetry Collector") for r in otlp_receiver.requests)
    by_id = {s.span_id: s for s in received}
    assert len(by_id) == len(received) == 3 * calls  # each span exactly once
    expected = {f"{s.get_span_context().span_id:016x}": _as_sent(s) for s in sent.get_finished_spans()}
    assert {span_id: _as_received(s) for span_id, s in by_id.items()} == expected

    agents = [s for s in received if s.name == "invoke_agent geo"]
    assert len(agents) == calls
    for agent in agents:
        (result,) = agent.events_named(sc.GEN_AI_EVALUATION_RESULT)
        assert result.attributes[sc.GEN_AI_EVALUATION_SCORE_VALUE] == 1.0
        assert result.attributes[sc.TS_SCORER_ID] == "answer-relevancy"
        assert {e.attributes[sc.TS_STEP_NAME] for e in agent.events_named(sc.TS_EVALUATION_STEP)} >= {
            "preprocess", "analyze",
        }  # fmt: skip


# --- the shipped tail-sampling config ------------------------------------------------------

LOW, FAILS, GOOD = "rain", "broken", "capital"
BASELINE_RATE = 0.10  # tail-sampling.yaml: sampling_percentage: 10


def _kind(i: int) -> str:
    return LOW if i % 10 == 0 else FAILS if i % 10 == 1 else GOOD


def _judge_with_failures(request: dict[str, Any]) -> Any:
    """geo_llm_and_judge, but a judge reply that is not JSON for questions naming FAILS."""
    prompt = next(m["content"] for m in request["messages"] if m["role"] == "user")
    return "no json here" if FAILS in prompt else geo_llm_and_judge(request)


def _binomial_bounds(n: int, p: float, sigmas: float = 5.0) -> tuple[int, int]:
    """Counts a Binomial(n, p) leaves with probability < 1e-6 (|z| > 5)."""
    mean, sd = n * p, math.sqrt(n * p * (1 - p))
    return max(0, math.floor(mean - sigmas * sd)), math.ceil(mean + sigmas * sd)


def test_shipped_tail_sampling_keeps_low_scores_and_failures_and_samples_the_rest(
    otlp_receiver: OTLPReceiver, stub_llm: StubLLMServer
) -> None:
    traces = 200
    stub_llm.responder = _judge_with_failures

    @tracescore.tool
    def look_up(topic: str) -> str:
        return f"facts about {topic}"

    @tracescore.agent(name="geo")
    def geo(question: str) -> str:
        look_up(question)
        return ANSWER

    # Unchanged, decision_wait (60 s) included: the tool span arrives at once, the agent span only
    # when its scores are attached; a shorter wait than scoring takes under load decides too early.
    collector = OTelCollector(
        CONFIG_DIR / "tail-sampling.yaml",
        env={"BACKEND_OTLP_ENDPOINT": otlp_receiver.grpc_address},
    )
    with collector:
        relevancy = tracescore.create_answer_relevancy_scorer(
            model="openai/judge", api_base=stub_llm.base_url, api_key="sk-test"
        )
        handle = tracescore.configure(
            exporter="otlp-grpc", endpoint=collector.grpc_endpoint, scorers=[relevancy],
            online={"max_wait_s": 120},
        )  # fmt: skip
        for i in range(traces):
            geo(f"Question {i} about the {_kind(i)}?")
        assert handle.flush(120)
        # A last low-score trace: once it is through, every earlier trace has been decided.
        geo(f"Sentinel question about the {LOW}?")
        assert handle.flush(60)
        otlp_receiver.wait_for_spans(lambda s: s.name == "invoke_agent geo" and "Sentinel" in str(s.attributes), timeout=120)

    agents = {s.trace_id: s for s in otlp_receiver.spans if s.name == "invoke_agent geo"}
    kept: dict[str, list[str]] = {LOW: [], FAILS: [], GOOD: []}
    for agent in agents.values():
        question = str(agent.attributes)
        if "Sentinel" in question:
            continue
        kind = next(k for k in (LOW, FAILS, GOOD) if f"the {k}?" in question)
        (result,) = agent.events_named(sc.GEN_AI_EVALUATION_RESULT)
        if kind == LOW:
            assert result.attributes[sc.GEN_AI_EVALUATION_SCORE_VALUE] == 0.0
        elif kind == FAILS:
            assert "error.type" in result.attributes
        else:
            assert result.attributes[sc.GEN_AI_EVALUATION_SCORE_VALUE] == 1.0
        kept[kind].append(agent.trace_id)

    assert len(kept[LOW]) == traces // 10  # every low score kept
    assert len(kept[FAILS]) == traces // 10  # every failed evaluation kept
    good = traces - 2 * (traces // 10)
    low, high = _binomial_bounds(good, BASELINE_RATE)
    assert low <= len(kept[GOOD]) <= high, f"kept {len(kept[GOOD])}/{good} of the well-scored traces"
    print(f"tail sampling kept {len(kept[GOOD])}/{good} = {len(kept[GOOD]) / good:.1%} of well-scored traces")
    # A kept trace is kept whole: its tool span came with it, nothing else did.
    tools = {s.trace_id for s in otlp_receiver.spans if s.name == "execute_tool look_up"}
    assert tools == set(agents)


# --- the shipped archive config, then `tracescore rescore` on what it wrote ----------------


def test_archive_config_writes_otlp_json_that_rescore_scores(
    otlp_receiver: OTLPReceiver, tmp_path: Path
) -> None:
    archive = tmp_path / "traces.jsonl"
    collector = OTelCollector(
        CONFIG_DIR / "archive.yaml",
        env={"ARCHIVE_PATH": str(archive), "BACKEND_OTLP_ENDPOINT": otlp_receiver.grpc_address},
    )
    with collector, sender(OTLPSpanExporter(endpoint=collector.grpc_endpoint, insecure=True)) as tracer:
        for i in range(10):
            agent_trace(tracer, question=f"What is the capital of France? ({i})")
        otlp_receiver.wait_for_spans(20, timeout=60)  # the backend copy
    # stopped: the file exporter has flushed
    archived = [span for line in archive.read_text().splitlines() for span in spans_from_otlp_json(line)]
    assert sorted((s.trace_id, s.span_id) for s in archived) == sorted(
        (s.trace_id, s.span_id) for s in otlp_receiver.spans
    )

    rescored = tmp_path / "rescored.jsonl"
    subprocess.run(
        [sys.executable, "-m", "tracescore", "rescore", str(archive), "-s", "similarity", "-o", str(rescored)],
        check=True, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    spans = [span for line in rescored.read_text().splitlines() for span in spans_from_otlp_json(line)]
    agents = [s for s in spans if s.name == "invoke_agent geo"]
    assert len(agents) == 10
    for agent in agents:
        (result,) = agent.events_named(sc.GEN_AI_EVALUATION_RESULT)
        assert result.attributes[sc.TS_SCORER_ID] == "content-similarity"
