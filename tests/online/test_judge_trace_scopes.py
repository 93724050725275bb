"""The judge traced beyond single calls: a conversation scorer's judge calls (in process and in
the gateway) become `chat` spans in a trace of their own linked to the conversation's last turn,
the carrier's result naming that trace; `run_evals`' judge calls become `chat` spans under the
item's span. Real litellm talks HTTP to the stub judge; spans reach a real OTLP receiver.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _gateway_helpers import agent_attributes, sender
from _helpers import SCORING_BUDGET_S, shut_down_pipelines
from _reach import judge
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

import tracescore
from tracescore import _semconv as sc
from tracescore.online import OnlineScorer
from tracescore.testing import OTLPReceiver, ReceivedSpan, Reply, StubLLMServer

CRITERION = "The agent answers every question."
STEPS = ["preprocess", "analyze", "reason"]  # answer relevancy's judge calls, in order


@pytest.fixture(autouse=True)
def _clean_pipelines(span_exporter: Any) -> Iterator[None]:
    yield
    shut_down_pipelines()


def _judge(request: dict[str, Any]) -> Reply:
    """The stub judge: multi-turn verdicts satisfied, answer relevancy's steps as `judge`."""
    step = request.get("response_format", {}).get("json_schema", {}).get("name", "")
    if step == "multi_turn_verdict":
        return Reply(content={"satisfied": True, "reasoning": "Every question is answered."})
    return judge(request)


def _conversation_scorer(stub: StubLLMServer, trace_judge: bool) -> OnlineScorer:
    return OnlineScorer(tracescore.create_multi_turn_judge_scorer(
        model="openai/judge-stub", api_base=stub.base_url, api_key="sk-test", timeout=10,
        criterion=CRITERION), trace_judge=trace_judge)


def _assert_conversation_traced(spans: list[ReceivedSpan], traced: bool) -> None:
    turns = sorted((s for s in spans if s.name == "invoke_agent geo"),
                   key=lambda s: s.start_time_unix_nano)
    assert len(turns) == 2 and turns[0].trace_id != turns[1].trace_id
    last = turns[-1]
    (carrier,) = [s for s in spans if s.attributes.get(sc.TS_EVALUATION_CARRIER)]
    assert carrier.parent_span_id == last.span_id
    (result,) = carrier.events_named(sc.GEN_AI_EVALUATION_RESULT)
    assert result.attributes[sc.GEN_AI_CONVERSATION_ID] == "conv-7"
    assert result.attributes[sc.TS_JUDGE_CALLS] == 1
    judged = [s for s in spans if s.attributes.get(sc.TS_JUDGE) is True]
    if not traced:
        assert judged == [] and sc.TS_JUDGE_TRACE_ID not in result.attributes
        return
    (chat,) = judged
    assert chat.trace_id == result.attributes[sc.TS_JUDGE_TRACE_ID]
    assert chat.trace_id not in {t.trace_id for t in turns}  # a trace of its own
    assert chat.parent_span_id is None and chat.kind == "CLIENT"
    assert chat.name == "chat openai/judge-stub" and chat.scope_name == "tracescore.judge"
    assert [(link.trace_id, link.span_id) for link in chat.links] == [
        (last.trace_id, last.span_id)]
    assert chat.attributes[sc.TS_JUDGE_STEP] == "analyze"
    assert chat.attributes[sc.TS_SCORER_ID] == "multi-turn-judge"
    assert chat.attributes[sc.TS_EVALUATED_SPAN_ID] == last.span_id
    assert chat.attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] == \
        result.attributes[sc.TS_JUDGE_INPUT_TOKENS]
    assert chat.events_named(sc.GEN_AI_EVALUATION_RESULT) == []  # never scored itself


@tracescore.agent(name="geo", conversation_id=lambda question: "conv-7")
def geo(question: str) -> str:
    return f"An answer to: {question}"


@pytest.mark.parametrize("traced", [True, False])
def test_a_conversation_scorers_judge_is_traced_in_process(
        otlp_receiver: OTLPReceiver, stub_llm: StubLLMServer, traced: bool) -> None:
    stub_llm.responder = _judge
    handle = tracescore.configure(
        exporter="otlp-http", endpoint=otlp_receiver.http_endpoint,
        scorers=[_conversation_scorer(stub_llm, traced)],
        online={"max_wait_s": SCORING_BUDGET_S, "conversations": {"quiet_s": 0.2}})
    for question in ("What is the capital of France?", "And of Spain?"):
        geo(question)
    spans = otlp_receiver.wait_for_spans(4 if traced else 3, timeout=SCORING_BUDGET_S)
    assert handle.flush(SCORING_BUDGET_S)
    _assert_conversation_traced(spans, traced)
    assert len(stub_llm.requests) == 1


def test_a_conversation_scorers_judge_is_traced_by_the_gateway(
        tmp_path: Path, otlp_receiver: OTLPReceiver, stub_llm: StubLLMServer) -> None:
    from tracescore.gateway import Gateway, GatewayConfig

    stub_llm.responder = _judge
    gateway = Gateway(GatewayConfig(
        grpc_endpoint="127.0.0.1:0", http_endpoint="127.0.0.1:0", health_endpoint=None,
        exporter_endpoint=otlp_receiver.grpc_endpoint, journal_path=str(tmp_path / "j.db"),
        journal_sync="normal", isolation="thread",
        scorers=[_conversation_scorer(stub_llm, True)], conversations={"quiet_s": 0.2},
        shutdown_timeout_s=10.0)).start()
    try:
        exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{gateway.http_port}/v1/traces")
        with sender(exporter) as tracer:
            for question in ("What is the capital of France?", "And of Spain?"):
                tracer.start_span("invoke_agent geo", attributes={
                    **agent_attributes(question=question), sc.GEN_AI_CONVERSATION_ID: "conv-7"}
                ).end()
                time.sleep(0.01)
        spans = otlp_receiver.wait_for_spans(4, timeout=SCORING_BUDGET_S)
    finally:
        gateway.stop(timeout_s=10)
    _assert_conversation_traced(spans, traced=True)


@pytest.mark.parametrize("traced", [True, False])
def test_run_evals_traces_its_judge_under_each_items_span(
        otlp_receiver: OTLPReceiver, stub_llm: StubLLMServer, monkeypatch: pytest.MonkeyPatch,
        traced: bool) -> None:
    monkeypatch.setenv("TRACESCORE_TRACE_JUDGE", str(traced).lower())
    stub_llm.responder = judge
    handle = tracescore.configure(exporter="otlp-http", endpoint=otlp_receiver.http_endpoint)
    scorer = tracescore.create_answer_relevancy_scorer(
        model="openai/judge-stub", api_base=stub_llm.base_url, api_key="sk-test", timeout=10)
    result = tracescore.run_evals(
        [{"input": "What is the capital of France?"}, {"input": "Who wrote Hamlet?"}], scorer,
        lambda question: f"An answer to: {question}", name="geo-eval", concurrency=2)
    assert handle.flush(SCORING_BUDGET_S)
    spans = otlp_receiver.wait_for_spans(8 if traced else 2, timeout=SCORING_BUDGET_S)
    items = [s for s in spans if s.name == "invoke_agent geo-eval"]
    assert sorted(s.trace_id for s in items) == sorted(str(i.trace_id) for i in result.items)
    judged = [s for s in spans if s.attributes.get(sc.TS_JUDGE) is True]
    assert len(judged) == (6 if traced else 0)
    for item in items:
        (event,) = item.events_named(sc.GEN_AI_EVALUATION_RESULT)
        assert event.attributes[sc.TS_JUDGE_CALLS] == 3
        mine = sorted((s for s in judged if s.parent_span_id == item.span_id),
                      key=lambda s: s.start_time_unix_nano)
        if not traced:
            assert sc.TS_JUDGE_TRACE_ID not in event.attributes
            continue
        assert event.attributes[sc.TS_JUDGE_TRACE_ID] == item.trace_id
        assert [s.attributes[sc.TS_JUDGE_STEP] for s in mine] == STEPS
        for chat in mine:
            assert chat.trace_id == item.trace_id and chat.kind == "CLIENT"
            assert chat.name == "chat openai/judge-stub" and chat.scope_name == "tracescore.judge"
            assert chat.attributes[sc.TS_EVALUATED_SPAN_ID] == item.span_id
            assert chat.attributes[sc.TS_SCORER_ID] == "answer-relevancy"
            assert chat.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] > 0
        assert sum(s.attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] for s in mine) == \
            event.attributes[sc.TS_JUDGE_INPUT_TOKENS]
