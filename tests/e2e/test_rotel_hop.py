"""A second, real collector hop: tracescore -> rotel (Rust OTLP collector from PyPI) -> OTLP receiver.

The scored agent span, its children and the gen_ai.evaluation.result events must survive the hop
unchanged, over gRPC and over HTTP. rotel is installed once into a cached venv outside the checkout.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from _helpers import GEO_ANSWER as ANSWER
from _helpers import (
    SCORING_BUDGET_S,
    geo_agent,
    geo_llm_and_judge,
    litellm_instrumented,
    shut_down_pipelines,
)
from opentelemetry import trace
from rigs.rotel import RotelCollector

import tracescore
from tracescore import _semconv as sc
from tracescore.testing import OTLPReceiver, StubLLMServer

QUESTION = "What is the capital of France?"


@pytest.fixture(autouse=True)
def _clean_pipelines(span_exporter) -> Iterator[None]:
    yield
    shut_down_pipelines()


def _run_scored_agent(stub: StubLLMServer, protocol: str, endpoint: str) -> None:
    geo = geo_agent(stub)
    stub.responder = geo_llm_and_judge
    relevancy = tracescore.create_answer_relevancy_scorer(
        model="openai/judge", api_base=stub.base_url, api_key="sk-test"
    )
    handle = tracescore.configure(
        exporter=f"otlp-{protocol}",
        endpoint=endpoint,
        scorers=[relevancy],
        online={"max_wait_s": SCORING_BUDGET_S},
    )
    with litellm_instrumented():
        assert geo(QUESTION) == ANSWER
    assert handle.flush(SCORING_BUDGET_S)


@pytest.mark.slow
@pytest.mark.timeout(600)  # first run installs rotel (seconds) into the cache
@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_score_events_survive_a_rotel_hop(
    otlp_receiver: OTLPReceiver, stub_llm: StubLLMServer, protocol: str
) -> None:
    downstream = otlp_receiver.grpc_endpoint if protocol == "grpc" else otlp_receiver.http_endpoint
    with RotelCollector(downstream, exporter_protocol=protocol) as rotel:
        upstream = rotel.grpc_endpoint if protocol == "grpc" else rotel.http_endpoint
        _run_scored_agent(stub_llm, protocol, upstream)
        spans = {s.name: s for s in otlp_receiver.wait_for_spans(3, timeout=30)}

    agent, tool, chat = (
        spans["invoke_agent geo"],
        spans["execute_tool lookup"],
        spans["chat agent-llm"],
    )
    assert tool.parent_span_id == agent.span_id and chat.parent_span_id == agent.span_id
    assert {s.protocol for s in spans.values()} == {
        protocol
    }  # it really came through rotel's exporter
    assert all(r.headers.get("user-agent", "").startswith("Rotel") for r in otlp_receiver.requests)
    assert agent.resource == trace.get_tracer_provider().resource.attributes  # type: ignore[attr-defined]
    assert agent.attributes[sc.GEN_AI_AGENT_NAME] == "geo"

    (result,) = agent.events_named(sc.GEN_AI_EVALUATION_RESULT)
    assert result.attributes[sc.GEN_AI_EVALUATION_SCORE_VALUE] == 1.0
    assert result.attributes[sc.GEN_AI_EVALUATION_SCORE_LABEL] == "relevant"
    assert result.attributes[sc.GEN_AI_EVALUATION_EXPLANATION].startswith("The score is 1 because")
    assert result.attributes[sc.TS_SCORER_ID] == "answer-relevancy"
    steps = agent.events_named(sc.TS_EVALUATION_STEP)
    assert {e.attributes[sc.TS_STEP_NAME] for e in steps} >= {"preprocess", "analyze"}
    assert all(
        isinstance(e.attributes.get(sc.TS_STEP_PROMPT), str)
        for e in steps
        if sc.TS_STEP_PROMPT in e.attributes
    )
    assert "chat judge" not in spans  # the judge's own calls are not traced
