"""The judge traced: each judge call of online scoring becomes a GenAI `chat` client span in a
trace of its own, linked to the evaluated span and marked as the judge's; the result carries the
judge trace id; nothing ever scores a judge span; a switch turns it off.

Real litellm talks HTTP to the stub judge; spans reach a real OTLP receiver, from the in-process
span processor (the judge in the scoring process and in the worker thread) and from
`tracescore serve`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _gateway_helpers import agent_attributes, sender
from _helpers import SCORING_BUDGET_S, shut_down_pipelines
from _reach import judge, relevancy_options
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.trace import Link, SpanContext, SpanKind, TraceFlags

import tracescore
from tracescore import _semconv as sc
from tracescore.online import OnlineScorer
from tracescore.online._processor import core_of
from tracescore.testing import OTLPReceiver, ReceivedSpan, StubLLMServer
from tracescore.testing._gateway_process import GatewayProcess

QUESTION = "What is the capital of France?"
ANSWER = "Paris is the capital of France."
STEPS = ["preprocess", "analyze", "reason"]  # answer relevancy's judge calls, in order
_last_handle: list[Any] = []  # the pipeline `_score_in_process` configured last


@pytest.fixture(autouse=True)
def _clean_pipelines(span_exporter: Any) -> Iterator[None]:
    yield
    shut_down_pipelines()


@tracescore.agent(name="geo")
def geo_agent(question: str) -> str:
    return ANSWER


def _scorer(stub: StubLLMServer, **judge_options: Any) -> Any:
    return tracescore.create_answer_relevancy_scorer(
        model="openai/judge-stub", api_base=stub.base_url, api_key="sk-test", timeout=10,
        backoff_base_s=0.001, backoff_max_s=0.01, **judge_options)


def _score_in_process(receiver: OTLPReceiver, scorer: Any, *, isolation: str = "thread",
                      expected: int) -> list[ReceivedSpan]:
    handle = tracescore.configure(exporter="otlp-http", endpoint=receiver.http_endpoint,
                                  scorers=[scorer], online={"max_wait_s": SCORING_BUDGET_S,
                                                            "isolation": isolation})
    _last_handle[:] = [handle]
    assert geo_agent(QUESTION) == ANSWER
    assert handle.flush(SCORING_BUDGET_S)
    return receiver.wait_for_spans(expected)


def _judge_spans(spans: list[ReceivedSpan]) -> list[ReceivedSpan]:
    return sorted((s for s in spans if s.attributes.get(sc.TS_JUDGE) is True),
                  key=lambda s: s.start_time_unix_nano)


def _assert_traced(spans: list[ReceivedSpan], agent_name: str, steps: list[str]) -> None:
    (agent,) = [s for s in spans if s.name == agent_name]
    (result,) = agent.events_named(sc.GEN_AI_EVALUATION_RESULT)
    judged = _judge_spans(spans)
    assert [s.attributes[sc.TS_JUDGE_STEP] for s in judged] == steps
    trace_id = result.attributes[sc.TS_JUDGE_TRACE_ID]
    assert trace_id != agent.trace_id  # a trace of its own
    for span in judged:
        assert span.trace_id == trace_id and span.parent_span_id is None
        assert span.name == "chat openai/judge-stub" and span.kind == "CLIENT"
        assert span.scope_name == "tracescore.judge"
        assert [(link.trace_id, link.span_id) for link in span.links] == [
            (agent.trace_id, agent.span_id)]
        attributes = span.attributes
        assert attributes[sc.GEN_AI_OPERATION_NAME] == "chat"
        assert attributes[sc.GEN_AI_REQUEST_MODEL] == "openai/judge-stub"
        assert attributes[sc.GEN_AI_PROVIDER_NAME] == "openai"
        assert attributes[sc.TS_SCORER_ID] == "answer-relevancy"
        assert attributes[sc.TS_EVALUATED_SPAN_ID] == agent.span_id
        assert span.end_time_unix_nano >= span.start_time_unix_nano > 0
        assert span.events_named(sc.GEN_AI_EVALUATION_RESULT) == []  # never scored itself
        if span.status_code == "ERROR":
            assert attributes[sc.ERROR_TYPE]
        else:
            assert attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] > 0
            assert attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] > 0
            assert attributes[sc.GEN_AI_RESPONSE_ID]
    successful = [s for s in judged if s.status_code != "ERROR"]
    assert sum(s.attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] for s in successful) == \
        result.attributes[sc.TS_JUDGE_INPUT_TOKENS]


@pytest.mark.parametrize("isolation", ["process", "thread"])
def test_each_judge_call_is_a_chat_span_linked_to_the_evaluated_span(
        otlp_receiver: OTLPReceiver, stub_llm: StubLLMServer, isolation: str) -> None:
    stub_llm.responder = judge
    spans = _score_in_process(otlp_receiver, OnlineScorer(_scorer(stub_llm), trace_judge=True),
                              isolation=isolation, expected=4)
    runner = core_of(_last_handle[0]._pipeline).isolation
    assert (runner is not None and runner.child_pid is not None) == (isolation == "process")
    _assert_traced(spans, "invoke_agent geo", STEPS)
    assert len(spans) == 4 and len(stub_llm.requests) == 3


def test_a_failed_attempt_is_an_error_span_and_the_retry_its_own(
        otlp_receiver: OTLPReceiver, stub_llm: StubLLMServer) -> None:
    stub_llm.responder = judge
    stub_llm.enqueue_error(500, "overloaded")
    spans = _score_in_process(otlp_receiver, OnlineScorer(_scorer(stub_llm), trace_judge=True),
                              expected=5)
    _assert_traced(spans, "invoke_agent geo", ["preprocess", *STEPS])
    failed = _judge_spans(spans)[0]
    assert failed.status_code == "ERROR" and failed.attributes[sc.ERROR_TYPE] == "500"


@pytest.mark.parametrize("switch", ["option", "env"])
def test_switched_off_no_judge_span_and_no_trace_id(
        otlp_receiver: OTLPReceiver, stub_llm: StubLLMServer, monkeypatch: pytest.MonkeyPatch,
        switch: str) -> None:
    stub_llm.responder = judge
    if switch == "env":
        monkeypatch.setenv("TRACESCORE_TRACE_JUDGE", "false")
        scorer = OnlineScorer(_scorer(stub_llm))
    else:
        monkeypatch.setenv("TRACESCORE_TRACE_JUDGE", "true")
        scorer = OnlineScorer(_scorer(stub_llm), trace_judge=False)
    (agent,) = _score_in_process(otlp_receiver, scorer, expected=1)
    (result,) = agent.events_named(sc.GEN_AI_EVALUATION_RESULT)
    assert result.attributes[sc.TS_JUDGE_CALLS] == 3  # judged, not traced
    assert sc.TS_JUDGE_TRACE_ID not in result.attributes
    assert [s.name for s in otlp_receiver.spans] == ["invoke_agent geo"]


def test_a_bad_switch_value_is_a_configuration_error(stub_llm: StubLLMServer) -> None:
    with pytest.raises(tracescore.ConfigurationError, match="trace_judge"):
        OnlineScorer(_scorer(stub_llm), trace_judge="no")  # type: ignore[arg-type]


# --- through `tracescore serve` -------------------------------------------------------------------
def _gateway(folder: Path, receiver: OTLPReceiver, stub: StubLLMServer, trace_judge: bool
             ) -> GatewayProcess:
    config = folder / "gateway.yaml"
    config.write_text("scoring:\n  isolation: thread\n  scorers:\n    - {scorer: relevancy, options: "
                      f"{relevancy_options(stub)}, trace_judge: {str(trace_judge).lower()}}}\n",
                      encoding="utf-8")
    return GatewayProcess(["--config", str(config), "--endpoint", receiver.grpc_endpoint,
                           "--journal", str(folder / "journal.db")],
                          env={"TRACESCORE_TRACE_JUDGE": "true"}).start()


def _send_agent_call(gateway: GatewayProcess) -> None:
    with sender(OTLPSpanExporter(endpoint=gateway.grpc_endpoint, insecure=True)) as tracer:
        tracer.start_span("invoke_agent geo", attributes=agent_attributes()).end()


@pytest.mark.slow
def test_the_gateway_traces_its_judge_and_never_scores_a_judge_span(
        tmp_path: Path, otlp_receiver: OTLPReceiver, stub_llm: StubLLMServer) -> None:
    stub_llm.responder = judge
    gateway = _gateway(tmp_path, otlp_receiver, stub_llm, trace_judge=True)
    try:
        _send_agent_call(gateway)
        spans = otlp_receiver.wait_for_spans(4, timeout=60)
        _assert_traced(spans, "invoke_agent geo", STEPS)
        asked = len(stub_llm.requests)
        # the judge's spans sent in again (a second gateway behind this one, say), and an agent
        # span the recognisers would score, marked as the judge's: none is scored
        received = _judge_spans(spans)
        otlp_receiver.clear()
        with sender(OTLPSpanExporter(endpoint=gateway.grpc_endpoint, insecure=True)) as tracer:
            for span in received:
                linked = SpanContext(int(span.links[0].trace_id, 16),
                                     int(span.links[0].span_id, 16), is_remote=True,
                                     trace_flags=TraceFlags(TraceFlags.SAMPLED))
                tracer.start_span(span.name, kind=SpanKind.CLIENT, attributes=span.attributes,
                                  links=[Link(linked)]).end()
            tracer.start_span("invoke_agent geo", attributes={
                **agent_attributes(question="Who wrote Hamlet?"), sc.TS_JUDGE: True}).end()
        again = otlp_receiver.wait_for_spans(4, timeout=60)
        assert sorted(s.name for s in again) == ["chat openai/judge-stub"] * 3 + [
            "invoke_agent geo"]
        assert all(not s.events for s in again)  # forwarded as they came, unscored
        assert len(stub_llm.requests) == asked  # no judge call for any of them
    finally:
        gateway.stop()


@pytest.mark.slow
def test_the_gateway_switched_off_sends_no_judge_span(
        tmp_path: Path, otlp_receiver: OTLPReceiver, stub_llm: StubLLMServer) -> None:
    stub_llm.responder = judge
    gateway = _gateway(tmp_path, otlp_receiver, stub_llm, trace_judge=False)
    try:
        _send_agent_call(gateway)
        (agent,) = otlp_receiver.wait_for_spans(1, timeout=60)
        (result,) = agent.events_named(sc.GEN_AI_EVALUATION_RESULT)
        assert result.attributes[sc.TS_JUDGE_CALLS] == 3
        assert sc.TS_JUDGE_TRACE_ID not in result.attributes
        gateway.stop()  # drained: anything it would have sent is out
        assert [s.name for s in otlp_receiver.spans] == ["invoke_agent geo"]
    finally:
        gateway.stop()


def test_the_span_processor_never_scores_a_span_marked_as_the_judges() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tracescore.online import ScoringSpanProcessor

    exporter = InMemorySpanExporter()
    processor = ScoringSpanProcessor(
        SimpleSpanProcessor(exporter), [tracescore.create_content_similarity_scorer()],
        score_genai_spans=True, isolation="thread")
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("an.instrumentation")
    for marked in (False, True):
        attributes = {**agent_attributes(), **({sc.TS_JUDGE: True} if marked else {})}
        tracer.start_span("invoke_agent geo", attributes=attributes).end()
    assert processor.force_flush(20_000)
    provider.shutdown()
    scored = {bool((s.attributes or {}).get(sc.TS_JUDGE)): [
        e.name for e in s.events if e.name == sc.GEN_AI_EVALUATION_RESULT]
        for s in exporter.get_finished_spans()}
    assert scored == {False: [sc.GEN_AI_EVALUATION_RESULT], True: []}


@pytest.mark.parametrize(("value", "traced"), [("true", True), ("false", False), ("'no'", None)])
def test_the_gateway_config_switch(tmp_path: Path, value: str, traced: bool | None) -> None:
    from tracescore.gateway import load_gateway_config

    config = tmp_path / "gateway.yaml"
    config.write_text("scoring:\n  scorers:\n    - {scorer: similarity, trace_judge: "
                      f"{value}}}\n", encoding="utf-8")
    if traced is None:
        with pytest.raises(tracescore.ConfigurationError,
                           match=r"scoring\.scorers\[0\].*trace_judge"):
            load_gateway_config(config, environ={})
        return
    (online,) = load_gateway_config(config, environ={}).scorers or ()
    assert online.trace_judge is traced
