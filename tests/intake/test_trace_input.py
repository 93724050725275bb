"""What a scorer sees of the call's trace, in process: the tool calls and retrieved context of the
spans that ended inside the agent call reach scorers that take them (thread and scoring process),
in call order, with errors, nested tools included, a concurrent sibling call's left out, within
the limits, and only for traces a scorer may sample.

Real decorated agents and tools, spans exported through a real OTLP receiver; the scorer below
reports what it was given in its reason (an exported evaluation event), so the check also covers
the scoring process.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from _helpers import SCORING_BUDGET_S, SeenScorer, shut_down_pipelines
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry import trace as trace_api
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracescore
from tracescore import _semconv as sc
from tracescore.online import OnlineScorer, ScoringSpanProcessor, TraceLimits
from tracescore.online._processor import collector_of
from tracescore.online._sampling import is_sampled
from tracescore.online.intake._trace_input import TraceSpans, gather, read_span
from tracescore.scoring import ToolCall
from tracescore.testing import OTLPReceiver

MANUAL = "Manual: refunds above 100 EUR need a manager."


@tracescore.tool
def search(query: str) -> str:
    return f"Refunds take 5 days ({query})."


@tracescore.tool
def refund(order: int) -> str:
    raise PermissionError("refund denied")


@tracescore.tool(name="lookup")
def lookup(key: str) -> dict[str, Any]:
    return {"key": key, "value": 42}


@tracescore.agent(name="helper")
def helper(key: str) -> str:
    tracescore.add_context(MANUAL)
    return str(lookup(key)["value"])


@tracescore.agent(name="support")
def support(question: str) -> str:
    search(question)
    try:
        refund(7)
    except PermissionError:
        pass
    helper("order-7")
    return "Your refund was denied; refunds take 5 days."


@pytest.fixture(autouse=True)
def _clean_pipelines(span_exporter) -> Iterator[None]:
    yield
    shut_down_pipelines()


def seen_by_agent(receiver: OTLPReceiver, count: int) -> dict[str, list[dict[str, Any]]]:
    """What the scorer saw, by agent name, for the first `count` agent spans received."""
    spans = receiver.wait_for_spans(lambda s: s.name.startswith("invoke_agent"), count=count,
                                    timeout=SCORING_BUDGET_S)
    seen: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        (event,) = span.events_named(sc.GEN_AI_EVALUATION_RESULT)
        seen.setdefault(span.attributes[sc.GEN_AI_AGENT_NAME], []).append(
            json.loads(event.attributes[sc.GEN_AI_EVALUATION_EXPLANATION]))
    return seen


def configure(receiver: OTLPReceiver, **online: Any) -> Any:
    return tracescore.configure(exporter="otlp-http", endpoint=receiver.http_endpoint,
                                scorers=[SeenScorer()],
                                online={"max_wait_s": SCORING_BUDGET_S, **online})


@pytest.mark.parametrize("isolation", ["thread", "process"])
def test_tool_calls_and_context_in_call_order_with_errors_and_nested_calls(
        otlp_receiver: OTLPReceiver, isolation: str) -> None:
    handle = configure(otlp_receiver, isolation=isolation)
    support("refund for order 7")
    assert handle.flush(SCORING_BUDGET_S)
    seen = seen_by_agent(otlp_receiver, 2)
    (outer,) = seen["support"]
    (inner,) = seen["helper"]
    search_result = "Refunds take 5 days (refund for order 7)."
    lookup_call = ["lookup", {"key": "order-7"}, {"key": "order-7", "value": 42}, None]
    assert outer["tools"] == [
        ["search", {"query": "refund for order 7"}, search_result, None],
        ["refund", {"order": 7}, None, "refund denied"],
        lookup_call,  # nested: it ran inside helper, which ran inside support
    ]
    assert outer["context"] == [search_result, MANUAL, '{"key":"order-7","value":42}']
    assert inner == {"tools": [lookup_call], "context": [MANUAL, '{"key":"order-7","value":42}'],
                     "ids": [None]}


def test_text_given_with_add_context_is_not_exported(otlp_receiver: OTLPReceiver) -> None:
    handle = configure(otlp_receiver)
    support("refund for order 7")
    assert handle.flush(SCORING_BUDGET_S)
    seen_by_agent(otlp_receiver, 2)
    for span in otlp_receiver.spans:
        exported = json.dumps([span.attributes, [e.attributes for e in span.events
                                                 if e.name != sc.GEN_AI_EVALUATION_RESULT]])
        assert MANUAL not in exported


def test_a_concurrent_sibling_calls_tools_are_not_mixed_in(otlp_receiver: OTLPReceiver) -> None:
    both_running = threading.Barrier(2, timeout=20)

    @tracescore.agent(name="sibling")
    def sibling(topic: str) -> str:
        search(f"{topic} first")
        both_running.wait()  # the other call's tools end between ours
        search(f"{topic} second")
        return topic

    handle = configure(otlp_receiver)
    tracer = trace_api.get_tracer("test")
    with tracer.start_as_current_span("request"), \
            tracescore.ContextThreadPoolExecutor(2) as pool:
        list(pool.map(sibling, ["apples", "pears"]))
    assert handle.flush(SCORING_BUDGET_S)
    spans = otlp_receiver.wait_for_spans(lambda s: s.name == "invoke_agent sibling", count=2,
                                         timeout=SCORING_BUDGET_S)
    assert len({s.trace_id for s in spans}) == 1
    for span in spans:
        (event,) = span.events_named(sc.GEN_AI_EVALUATION_RESULT)
        seen = json.loads(event.attributes[sc.GEN_AI_EVALUATION_EXPLANATION])
        topic = json.loads(span.attributes[sc.GEN_AI_OUTPUT_MESSAGES])[0]["parts"][0]["content"]
        assert [t[1]["query"] for t in seen["tools"]] == [f"{topic} first", f"{topic} second"]


@pytest.mark.parametrize("limits, expected_tools, expected_context", [
    ({"max_tool_calls": 2}, ["search", "refund"], 2),  # cut before lookup; MANUAL came first
    # search's recorded arguments and result fit; refund's arguments and error would not
    ({"max_chars": len('{"query":"refund for order 7"}Refunds take 5 days (refund for order 7).')
      + len('{"order":7}refund denied') - 1}, ["search"], 1),
    ({"max_tool_calls": 0}, [], 0),
])
def test_collection_stays_within_the_limits(otlp_receiver: OTLPReceiver, limits: dict[str, int],
                                            expected_tools: list[str],
                                            expected_context: int) -> None:
    handle = configure(otlp_receiver, trace_limits=limits)
    support("refund for order 7")
    assert handle.flush(SCORING_BUDGET_S)
    (outer,) = seen_by_agent(otlp_receiver, 2)["support"]
    assert [t[0] for t in outer["tools"]] == expected_tools
    assert len(outer["context"]) == expected_context


def test_trace_limits_are_validated() -> None:
    with pytest.raises(tracescore.ConfigurationError, match="max_chars"):
        ScoringSpanProcessor(SimpleSpanProcessor(InMemorySpanExporter()), [SeenScorer()], trace_limits={"max_chars": -1})
    with pytest.raises(tracescore.ConfigurationError, match="max_tool_calls"):
        TraceLimits(max_tool_calls=1.5)  # type: ignore[arg-type]
    with pytest.raises(tracescore.ConfigurationError, match="unknown keys"):
        ScoringSpanProcessor(SimpleSpanProcessor(InMemorySpanExporter()), [SeenScorer()], trace_limits={"max_calls": 3})


def test_only_traces_a_scorer_may_sample_are_collected(otlp_receiver: OTLPReceiver) -> None:
    rate = 0.5
    handle = tracescore.configure(exporter="otlp-http", endpoint=otlp_receiver.http_endpoint,
                                  scorers=[OnlineScorer(SeenScorer(), rate=rate)])
    processor = handle._pipeline
    assert isinstance(processor, ScoringSpanProcessor)
    tracked: list[tuple[int, bool]] = []

    @tracescore.tool
    def probe() -> None:
        trace_id = trace_api.get_current_span().get_span_context().trace_id
        tracked.append((trace_id, trace_id in collector_of(processor)))

    @tracescore.agent(name="prober")
    def prober(i: int) -> int:
        probe()
        return i

    for i in range(60):
        prober(i)
    assert {collected for trace_id, collected in tracked} == {True, False}
    assert all(collected == is_sampled(trace_id, rate) for trace_id, collected in tracked)
    assert not collector_of(processor)  # nothing kept once the calls ended


def test_calls_made_inside_run_evals_are_not_collected(otlp_receiver: OTLPReceiver) -> None:
    handle = configure(otlp_receiver)
    processor = handle._pipeline
    kept: list[int] = []

    @tracescore.agent(name="evaluated")
    def evaluated(question: str) -> str:
        kept.append(len(collector_of(processor)))
        return question

    tracescore.run_evals(data=[{"input": "q"}], scorers=[SeenScorer()], target=evaluated)
    assert kept == [0]


# --- reading one span (the reader both front doors share) --------------------------------------------
texts = st.text(min_size=1, max_size=30)


@settings(max_examples=60, deadline=None)
@given(name=texts, args=st.dictionaries(texts, st.integers(), max_size=3), result=texts,
       failed=st.booleans(), call_id=st.none() | texts, genai=st.booleans())
def test_tool_spans_of_both_conventions(name: str, args: dict[str, int], result: str,
                                        failed: bool, call_id: str | None, genai: bool) -> None:
    if genai:
        attributes: dict[str, Any] = {
            sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL, sc.GEN_AI_TOOL_NAME: name,
            sc.GEN_AI_TOOL_CALL_ARGUMENTS: json.dumps(args), sc.GEN_AI_TOOL_CALL_RESULT: result}
        if call_id is not None:
            attributes[sc.GEN_AI_TOOL_CALL_ID] = call_id
    else:
        attributes = {sc.OI_SPAN_KIND: "TOOL", sc.OI_TOOL_NAME: name,
                      sc.OI_INPUT_VALUE: json.dumps(args), sc.OI_OUTPUT_VALUE: result}
        if call_id is not None:
            attributes[sc.OI_TOOL_CALL_ID] = call_id
    item = read_span("span name", attributes, 5, "boom" if failed else None)
    assert item is not None and item.start_ns == 5
    expected_result = None if failed else (json.loads(result) if result[0] in "{[" and
                                           _is_json(result) else result)
    assert item.tool_call() == ToolCall(name=name, arguments=args, result=expected_result,
                                        error="boom" if failed else None, call_id=call_id)
    assert item.texts() == ([] if failed else [result])


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


@settings(max_examples=40, deadline=None)
@given(docs=st.lists(texts, min_size=1, max_size=5), marked=st.lists(texts, max_size=3))
def test_retriever_spans_and_marked_context(docs: list[str], marked: list[str]) -> None:
    openinference = {sc.OI_SPAN_KIND: "RETRIEVER",
                     **{f"retrieval.documents.{i}.document.content": d
                        for i, d in reversed(list(enumerate(docs)))}}
    genai = {sc.GEN_AI_OPERATION_NAME: sc.OP_RETRIEVAL,
             sc.GEN_AI_RETRIEVAL_DOCUMENTS: json.dumps([{"id": str(i), "content": d}
                                                         for i, d in enumerate(docs)])}
    for attributes in (openinference, genai):
        item = read_span("retrieve", {**attributes, sc.TS_CONTEXT: marked}, 0, None)
        assert item is not None and item.tool is None
        assert item.texts() == [*docs, *marked]
    plain = read_span("step", {sc.TS_CONTEXT: marked}, 0, None)
    assert (plain.texts() if plain else []) == marked
    assert read_span("chat", {sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT}, 0, None) is None



# --- a judged scorer online: the context it judges is redacted, nothing raw is exported --------------
SECRET = "sk-proj-" + "A1b2C3d4" * 4


@tracescore.tool
def key_lookup(account: str) -> str:
    return f"The Model S launched in 2012. Account {account} uses key {SECRET}."


@tracescore.agent(name="cars")
def cars(question: str) -> str:
    key_lookup("acme")
    tracescore.add_context(f"Internal note: rotate {SECRET} soon.")
    return "The Model S launched in 2012."


def test_a_judged_scorer_gets_the_context_redacted_and_nothing_raw_is_exported(
        otlp_receiver: OTLPReceiver, stub_llm: Any) -> None:
    stub_llm.enqueue({"claims": ["The Model S launched in 2012."]})
    stub_llm.enqueue({"verdicts": [{"verdict": "yes", "reason": "stated"}]})
    stub_llm.enqueue({"reason": "The score is 1 because the context states it."})
    faithfulness = tracescore.create_faithfulness_scorer(
        model="openai/judge-stub", api_base=stub_llm.base_url, api_key="sk-test", timeout=10)
    handle = tracescore.configure(exporter="otlp-http", endpoint=otlp_receiver.http_endpoint,
                                  scorers=[faithfulness],
                                  online={"max_wait_s": SCORING_BUDGET_S, "isolation": "thread"})
    cars("When did the Model S launch?")
    assert handle.flush(SCORING_BUDGET_S)
    (span,) = otlp_receiver.wait_for_spans(lambda s: s.name == "invoke_agent cars",
                                           timeout=SCORING_BUDGET_S)
    (result,) = span.events_named(sc.GEN_AI_EVALUATION_RESULT)
    assert result.attributes[sc.GEN_AI_EVALUATION_SCORE_VALUE] == 1.0
    analyze = json.dumps(stub_llm.requests[1].messages)
    assert "launched in 2012" in analyze and "rotate" in analyze  # both pieces were judged
    assert SECRET not in json.dumps([r.messages for r in stub_llm.requests])
    for exported in otlp_receiver.spans:
        assert SECRET not in json.dumps([exported.attributes,
                                         [e.attributes for e in exported.events]], default=str)


def test_with_content_capture_off_scorers_still_get_arguments_and_results_unexported(
        otlp_receiver: OTLPReceiver) -> None:
    scorer = SeenScorer()
    handle = tracescore.configure(exporter="otlp-http", endpoint=otlp_receiver.http_endpoint,
                                  capture_content=False, scorers=[scorer],
                                  online={"max_wait_s": SCORING_BUDGET_S, "isolation": "thread"})
    support("refund for order 7")
    search("not inside an agent call")  # nothing kept for it
    assert handle.flush(SCORING_BUDGET_S)
    outer = scorer.seen["refund for order 7"]
    assert outer["tools"][0] == ["search", {"query": "refund for order 7"},
                                 "Refunds take 5 days (refund for order 7).", None]
    assert outer["tools"][1] == ["refund", {"order": 7}, None, "refund denied"]
    assert outer["context"][1] == MANUAL
    tools = [s for s in otlp_receiver.spans if s.name.startswith("execute_tool")]
    assert len(tools) == 4
    for span in tools:
        assert sc.GEN_AI_TOOL_CALL_ARGUMENTS not in span.attributes
        assert sc.GEN_AI_TOOL_CALL_RESULT not in span.attributes


# --- which spans belong to an agent call: any tree, any end order ------------------------------------
@settings(max_examples=80, deadline=None)
@given(data=st.data(), size=st.integers(2, 40))
def test_an_agent_call_gets_exactly_its_subtrees_items_in_start_order(data: st.DataObject,
                                                                     size: int) -> None:
    # span i's parent is a lower-numbered span (a tree rooted at span 1); some spans are tools
    parents = {i: data.draw(st.integers(1, i - 1)) for i in range(2, size + 1)}
    starts = data.draw(st.permutations(range(size)))
    tools = data.draw(st.sets(st.integers(1, size)))
    agent = data.draw(st.integers(1, size))
    trace = TraceSpans(0.0)
    for span_id in data.draw(st.permutations(range(1, size + 1))):  # any arrival order
        item = read_span(f"execute_tool t{span_id}",
                         {sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL}, starts[span_id - 1],
                         None) if span_id in tools else None
        trace.add(span_id, parents.get(span_id), item, max_spans=1000)

    def inside(span_id: int) -> bool:
        while span_id != agent and span_id in parents:
            span_id = parents[span_id]
        return span_id == agent

    expected = sorted((s for s in tools if inside(s)), key=lambda s: starts[s - 1])
    found = gather(trace.under(agent), TraceLimits())
    assert [c.name for c in found.tool_calls] == [f"t{s}" for s in expected]


def test_agent_spans_of_other_instrumentations_get_their_tool_spans() -> None:
    scorer = SeenScorer()
    exporter = InMemorySpanExporter()
    processor = ScoringSpanProcessor(SimpleSpanProcessor(exporter), [scorer],
                                     recognise=["openinference"], isolation="thread")
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("openinference.instrumentation.test")
    agent = {sc.OI_SPAN_KIND: "AGENT", sc.OI_INPUT_VALUE: "Refund order 7?",
             sc.OI_OUTPUT_VALUE: "Denied."}
    with tracer.start_as_current_span("agent", attributes=agent):
        with tracer.start_as_current_span("lookup", attributes={
                sc.OI_SPAN_KIND: "TOOL", sc.OI_TOOL_NAME: "lookup",
                sc.OI_INPUT_VALUE: '{"order": 7}', sc.OI_OUTPUT_VALUE: "order 7: 250 EUR"}):
            pass
        with tracer.start_as_current_span("retrieve", attributes={
                sc.OI_SPAN_KIND: "RETRIEVER",
                "retrieval.documents.0.document.content": "Refunds over 100 EUR need a manager."}):
            pass
    assert processor.force_flush(30_000)
    provider.shutdown()
    assert scorer.seen["Refund order 7?"] == {
        "tools": [["lookup", {"order": 7}, "order 7: 250 EUR", None]],
        "context": ["order 7: 250 EUR", "Refunds over 100 EUR need a manager."], "ids": [None]}
