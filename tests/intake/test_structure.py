"""Agent calls found by the trace's shape, through both front doors (the span processor and the
gateway's engine, `_span_trees`): nested anonymous agent spans score the named agent (family 5 of
issue 34), an input recorded empty falls back to the LLM calls (family 4), a loop's top span
without agent marker is scored from its LLM calls (families 1 and 6), and every candidate that
cannot be read is counted, never skipped in silence. Generated trees check the rule at large."""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from pathlib import Path

import pytest
from _gateway_helpers import plain_request
from _span_trees import (
    Node,
    Outcome,
    both,
    chat,
    engine,
    messages,
    sent_requests,
    through_the_gateway,
    through_the_processor,
    tool,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.trace import SpanKind

from tracescore import _semconv as sc
from tracescore.online.intake import _diagnose

Q = "What is the capital of France?"
A = "Paris is the capital of France."
PAIR = [(Q, A)]


def _same(processor: Outcome, gateway: Outcome) -> Outcome:
    """Both doors made the same of the trees (the gateway also marks what it let go unscored)."""
    assert (processor.scored, processor.seen, processor.unreadable) == (
        gateway.scored, gateway.seen, gateway.unreadable)
    assert processor.spans == gateway.spans
    return processor


def _anonymous(*children: Node) -> Node:
    return Node("invoke_agent", {sc.GEN_AI_OPERATION_NAME: "invoke_agent"}, list(children))


def _named(*children: Node, **attributes: str) -> Node:
    return Node("invoke_agent geo", {sc.GEN_AI_OPERATION_NAME: "invoke_agent",
                                     sc.GEN_AI_AGENT_NAME: "geo", "test.node": "agent",
                                     **attributes}, list(children))


# --- family 5: nested agent spans without content -------------------------------------------------
def test_a_named_agent_wrapping_anonymous_turns_is_scored_once_on_the_named_span() -> None:
    def trees() -> list[Node]:
        return [Node("invoke_workflow trip", {sc.GEN_AI_OPERATION_NAME: "invoke_workflow"}, [
            _named(_anonymous(chat(Q, "Let me look that up.")), tool(),
                   _anonymous(chat(Q, A)))])]

    found = _same(*both(trees))
    assert found.scored == ["agent"]  # not a wrapper; the workflow root is no call of its own
    assert found.seen == PAIR
    assert found.unreadable == Counter()  # nothing logged as unreadable
    assert through_the_gateway(trees()).unscored == []  # no wrapper marked unscored


def test_an_anonymous_agent_span_at_the_root_is_still_an_agent_call() -> None:
    found = _same(*both(lambda: [Node("invoke_agent", {sc.GEN_AI_OPERATION_NAME: "invoke_agent",
                                                       "test.node": "agent"}, [chat(Q, A)])]))
    assert (found.scored, found.seen) == (["agent"], PAIR)


# --- family 4: input present but empty --------------------------------------------------------------
def test_an_input_recorded_empty_is_read_from_the_llm_calls_in_every_convention() -> None:
    def trees() -> list[Node]:
        return [
            _named(chat(Q, A), **{sc.GEN_AI_INPUT_MESSAGES: "[]",
                                  sc.GEN_AI_OUTPUT_MESSAGES: messages("assistant", A)}),
            Node("geo", {sc.OI_SPAN_KIND: "AGENT", sc.OI_INPUT_VALUE: "",
                         sc.OI_OUTPUT_VALUE: A, "test.node": "agent"}, [chat(Q, A)]),
            Node("geo.agent", {sc.TL_SPAN_KIND: "agent", "traceloop.entity.name": "geo",
                               sc.TL_ENTITY_INPUT: json.dumps({"args": [], "kwargs": {}}),
                               sc.TL_ENTITY_OUTPUT: json.dumps(A), "test.node": "agent"},
                 [chat(Q, A)]),
        ]

    found = _same(*both(trees))
    assert found.scored == ["agent"] * 3
    assert found.seen == PAIR * 3


# --- families 1 and 6: agent calls found by structure -------------------------------------------
def test_a_loop_top_without_agent_marker_is_scored_from_its_llm_calls() -> None:
    def loop() -> list[Node]:
        return [chat(Q, "Let me look that up."), tool(), chat(Q, A)]

    def trees() -> list[Node]:
        return [
            # a generic tracing decorator: no marker at all
            Node("answer_question", {"code.function": "answer_question", "test.node": "top"},
                 loop()),
            # an operation name outside the GenAI list
            Node("framework run", {sc.GEN_AI_OPERATION_NAME: "framework", "test.node": "top"},
                 loop()),
            # a ReAct program's root CHAIN (its input not a conversation state)
            Node("ReAct.forward", {sc.OI_SPAN_KIND: "CHAIN", sc.OI_INPUT_VALUE: Q,
                                   "test.node": "top"}, loop()),
            # a request's top span (its parent in another service) whose children are LLM calls
            Node("POST /ask", {"http.route": "/ask", "test.node": "top"}, loop(),
                 kind=SpanKind.SERVER, remote_parent=True),
            # a decorated agent inside a plain root: the root is the top of the loop
            Node("main", {"test.node": "top"}, [Node("step", {}, loop())]),
        ]

    found = _same(*both(trees))
    assert found.scored == ["top"] * 5
    assert found.seen == PAIR * 5
    assert found.unreadable == Counter()


def test_spans_without_llm_calls_or_inside_an_agent_are_no_structural_calls() -> None:
    def trees() -> list[Node]:
        return [
            Node("GET /items", {"http.route": "/items"}, [Node("db", {"db.system": "x"})],
                 kind=SpanKind.SERVER),
            chat(Q, A),  # a bare model call is no agent call
            Node("main", {}, [_named(Node("step", {}, [chat(Q, A)]))]),  # the agent's own
        ]

    found = _same(*both(trees))
    assert (found.scored, found.seen, found.unreadable) == (["agent"], PAIR, Counter())


# --- every miss explained ---------------------------------------------------------------------------
def test_a_structural_candidate_whose_llm_calls_hold_no_text_is_counted_and_logged_once(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    silent = Node("chat m", {sc.GEN_AI_OPERATION_NAME: "chat",
                             sc.GEN_AI_INPUT_MESSAGES: messages("system", "Be brief."),
                             sc.GEN_AI_OUTPUT_MESSAGES: messages("assistant", A)})

    def trees() -> list[Node]:
        return [Node("answer_question", {"app.secret": "SECRET-1"}, [silent]),
                Node("answer_question", {"app.secret": "SECRET-2"}, [silent]),
                Node("framework run", {sc.GEN_AI_OPERATION_NAME: "framework"}, [silent])]

    monkeypatch.setattr(_diagnose, "_warned", set())  # a fresh process's log-once state
    with caplog.at_level(logging.WARNING, logger="tracescore"):
        found = _same(*both(trees))
    assert found.scored == [] and found.seen == []
    assert found.unreadable == Counter({("unknown", "no_text_in_llm_calls"): 2,
                                        ("genai", "no_text_in_llm_calls"): 1})
    logged = [r.getMessage() for r in caplog.records if "agent span not scored" in r.getMessage()]
    assert len(logged) == 2  # once per (framework, reason) in the process: both doors share it
    unknown = next(line for line in logged if "(unknown)" in line)
    assert "'answer_question'" in unknown and "app.secret, test.node" in unknown
    assert "SECRET" not in " ".join(logged)  # keys, never values


# --- generated trees --------------------------------------------------------------------------------
_NAMES = st.from_regex(r"[a-z]{3,9}(_[a-z]{2,6})?", fullmatch=True).filter(
    lambda n: n not in {"agent", "chain", "workflow", "run", "step", "turn"})
_WORDS = st.lists(st.sampled_from(["alpha", "brook", "cedar", "delta", "ember", "fjord",
                                   "grove", "harbor", "islet", "juniper"]),
                  min_size=2, max_size=5).map(" ".join)


def _llm(convention: str, question: str | None, answer: str) -> Node:
    if convention == "openinference":
        attributes = {sc.OI_SPAN_KIND: "LLM",
                      "llm.input_messages.0.message.role": "system",
                      "llm.input_messages.0.message.content": "You are terse.",
                      "llm.output_messages.0.message.role": "assistant",
                      "llm.output_messages.0.message.content": answer}
        if question is not None:
            attributes["llm.input_messages.1.message.role"] = "user"
            attributes["llm.input_messages.1.message.content"] = question
        return Node("llm", attributes)
    if question is None:
        return Node("chat m", {sc.GEN_AI_OPERATION_NAME: "chat",
                               sc.GEN_AI_INPUT_MESSAGES: messages("system", "You are terse."),
                               sc.GEN_AI_OUTPUT_MESSAGES: messages("assistant", answer)})
    return chat(question, answer)


@st.composite
def _generated(draw: st.DrawFn) -> tuple[Node, str, tuple[str, str] | None, tuple[str, str] | None]:
    """(tree, the node expected scored, the (question, answer) judged, or the (convention,
    reason) counted)."""
    question = f"What about {draw(_WORDS)}?"
    answer = f"The {draw(_WORDS)}."
    marker = draw(st.sampled_from(["genai", "openinference", "traceloop", "framework", "chain",
                                   None]))
    content = draw(st.sampled_from(["span", "empty", "llm"])) if marker == "genai" else "llm"
    text = draw(st.booleans()) or content == "span"  # the LLM calls hold the question
    llm = draw(st.sampled_from(["genai", "openinference"]))
    turns = draw(st.integers(1, 3))
    depth = draw(st.integers(0, 3))  # anonymous wrappers around each turn
    between = draw(st.booleans())  # a plain span between the agent span and its turns
    above = draw(st.sampled_from([None, "internal", "server"]))  # a plain span above it
    name = draw(_NAMES)

    steps: list[Node] = []
    for turn in range(turns):
        last = turn == turns - 1
        node = _llm(llm, question if text else None, answer if last else "Let me check.")
        for _ in range(depth):
            node = _anonymous(node)
        steps.append(node)
        if not last:
            steps.append(tool())
    if between:
        steps = [Node(draw(_NAMES), {}, steps)]
    attributes: dict[str, object] = {}
    if marker == "genai":
        agent = Node(f"invoke_agent {name}", {sc.GEN_AI_OPERATION_NAME: "invoke_agent",
                                              sc.GEN_AI_AGENT_NAME: name}, steps)
        if content in ("span", "empty"):
            agent.attributes[sc.GEN_AI_INPUT_MESSAGES] = (
                messages("user", question) if content == "span" else "[]")
            agent.attributes[sc.GEN_AI_OUTPUT_MESSAGES] = messages("assistant", answer)
    elif marker == "openinference":
        agent = Node(name, {sc.OI_SPAN_KIND: "AGENT", sc.OI_AGENT_NAME: name}, steps)
    elif marker == "traceloop":  # an agent span its reader cannot read: no content on it
        agent = Node(f"{name}.agent", {sc.TL_SPAN_KIND: "agent", sc.TL_ENTITY_NAME: name}, steps)
    else:
        if marker == "framework":
            attributes[sc.GEN_AI_OPERATION_NAME] = "framework"
        elif marker == "chain":
            attributes[sc.OI_SPAN_KIND] = "CHAIN"
        agent = Node(name, attributes, steps)
    tree = agent
    if above is not None:
        tree = Node(draw(_NAMES), {}, [agent],
                    kind=SpanKind.SERVER if above == "server" else SpanKind.INTERNAL)
    # the outermost span of the agent's loop: the marked agent span, else the loop's top
    expected = agent if marker in ("genai", "openinference", "traceloop") else tree
    expected.attributes["test.node"] = "expected"
    if text:
        return tree, "expected", (question, answer), None
    if marker == "genai":
        reason = "no_question_text" if content == "empty" else "no_input_or_output"
        return tree, "expected", None, ("genai", reason)
    if marker in ("openinference", "traceloop"):
        return tree, "expected", None, (str(marker), "no_input_or_output")
    convention = {"framework": "genai", "chain": "openinference"}.get(str(marker), "unknown")
    if expected is not agent:
        convention = "unknown"  # the plain span above it is the loop's top
    return tree, "expected", None, (convention, "no_text_in_llm_calls")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_generated(), shuffled=st.none() | st.integers(0, 2**16))
def test_generated_trees_score_the_outermost_agent_span_or_count_the_miss(
        case: tuple[Node, str, tuple[str, str] | None, tuple[str, str] | None],
        shuffled: int | None) -> None:
    """In process; and through the gateway, one request per span as they end, or the whole
    trace in one request in any order."""
    tree, node, judged, counted = case
    for found in (through_the_processor([tree]),
                  through_the_gateway([tree], llm_wait_s=0, shuffled=shuffled)):
        if judged is not None:
            assert (found.scored, found.seen, found.unreadable) == ([node], [judged], Counter())
        else:  # never silent
            assert (found.scored, found.seen) == ([], [])
            assert found.unreadable == Counter({counted: 1})


# --- the gateway's pass-through ------------------------------------------------------------------
def test_plain_spans_pass_through_unread_unless_their_trace_awaits_its_loop_top() -> None:

    with engine() as (built, scorer, output, _):
        plain = plain_request(20)
        built.accept(plain, plain.SerializeToString())
        assert built.traces.trace_ids() == []  # not read: no marker, no trace awaited
        requests = sent_requests([Node("answer_question", {}, [chat(Q, A)])])
        llm, top = requests  # the model call, then its parent (no marker key)
        built.accept(llm, llm.SerializeToString())
        [awaited] = built.traces.trace_ids()
        assert list(built.traces.llm_traces) == [awaited]
        mixed = plain_request(20)  # the top comes with unrelated plain spans
        mixed.resource_spans[0].scope_spans[0].spans.extend(
            top.resource_spans[0].scope_spans[0].spans)
        built.accept(mixed, mixed.SerializeToString())
        assert built.traces.trace_ids() == [awaited]  # the plain spans were not read
        assert dict(built.traces.llm_traces) == {}  # its top came: nothing awaited
        deadline = time.monotonic() + 10
        while built.held and time.monotonic() < deadline:
            time.sleep(0.01)
        assert built.flush(10.0)
    assert scorer.seen == PAIR
    assert sum(len(ss.spans) for r in output.requests for rs in r.resource_spans
               for ss in rs.scope_spans) == 20 + 2 + 20


def test_an_agent_span_its_reader_cannot_read_is_read_from_its_llm_calls() -> None:
    def trees() -> list[Node]:
        return [
            # OpenLLMetry's agent span without content (content capture off on it only)
            Node("main", {}, [Node("geo.agent", {sc.TL_SPAN_KIND: "agent",
                                                 "traceloop.entity.name": "geo",
                                                 "test.node": "agent"}, [chat(Q, A)])]),
            # Mastra's agent run without its input
            Node("invoke_agent geo", {sc.GEN_AI_OPERATION_NAME: "invoke_agent",
                                      sc.GEN_AI_AGENT_NAME: "geo", "mastra.span.type": "agent_run",
                                      "mastra.agent_run.output": json.dumps({"text": A}),
                                      "test.node": "agent"}, [Node("step", {}, [chat(Q, A)])]),
        ]

    found = _same(*both(trees))
    assert (found.scored, found.seen, found.unreadable) == (["agent"] * 2, PAIR * 2, Counter())


def test_a_structural_call_held_across_a_restart_goes_on_unscored_and_counted(
        tmp_path: Path) -> None:
    """Its LLM calls were in the buffer of the gateway that stopped: the next one waits for
    them, then forwards it with an unscored event, counted."""
    from tracescore.gateway._journal import HELD, Journal

    journal = Journal(tmp_path / "journal.db")
    _, top = sent_requests([Node("answer_question", {}, [chat(Q, A)])])
    journal.add([(HELD, 1, top.SerializeToString())])
    with engine(llm_wait_s=0.05, journal=journal) as (built, scorer, output, metrics):
        assert built.replay() == 1
        deadline = time.monotonic() + 10
        while built.held and time.monotonic() < deadline:
            time.sleep(0.01)
    [request] = output.requests
    [span] = request.resource_spans[0].scope_spans[0].spans
    assert [e.name for e in span.events] == [sc.TS_UNSCORED]
    assert scorer.seen == []
    assert metrics.labelled("unreadable_agent_spans") == {("unknown", "no_text_in_llm_calls"): 1}
    journal.close()


@settings(max_examples=60, deadline=None)
@given(spans=st.integers(1, 60), awaited=st.integers(0, 80), seed=st.integers(0, 2**32 - 1))
def test_the_awaited_traces_of_a_request_are_found_in_its_bytes(
        spans: int, awaited: int, seed: int) -> None:
    """Searched one by one for a few awaited traces, found by one scan of the request's
    trace-id fields for many: the same answer, whatever the request's other bytes."""
    import random

    from tracescore.gateway._agent_spans import _awaited_in

    rng = random.Random(seed)
    request = plain_request(spans, rng)
    sent = {span.trace_id for span in request.resource_spans[0].scope_spans[0].spans}
    for span in request.resource_spans[0].scope_spans[0].spans:  # bytes like a trace id field
        span.attributes.add(key="noise").value.bytes_value = b"\x0a\x10" + rng.randbytes(20)
    others = {rng.randbytes(16) for _ in range(awaited)}
    held = set(rng.sample(sorted(sent), k=rng.randint(0, len(sent)))) | others
    assert _awaited_in(request.SerializeToString(), held) == frozenset(held & sent)


def test_a_plain_root_above_our_own_agent_is_not_scored_again() -> None:
    """In process, `@tracescore.agent` calls are ours: the LLM calls below one are its own,
    so the plain span above it is no agent call of its own."""
    from _span_trees import Recording
    from opentelemetry import trace as trace_api
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import tracescore

    exporter, scorer = InMemorySpanExporter(), Recording()
    handle = tracescore.configure(exporter=exporter, batch=False, scorers=[scorer], online={
        "isolation": "thread", "recognise": tracescore.build_recognisers()})

    @tracescore.llm(model="m")
    def model(messages: list[dict[str, str]]) -> str:
        return A

    @tracescore.agent(name="geo")
    def geo(question: str) -> str:
        return model([{"role": "user", "content": question}])

    try:
        with trace_api.get_tracer("app").start_as_current_span("main"):
            geo(Q)
        assert handle.flush(10)
    finally:
        handle.shutdown(10)
    scored = [s.name for s in exporter.get_finished_spans()
              if any(e.name == sc.GEN_AI_EVALUATION_RESULT for e in s.events)]
    assert (scored, scorer.seen) == (["invoke_agent geo"], PAIR)
