"""An agent nested inside a larger program with one model turn (issue 34, family 1: Haystack's
Agent inside a Pipeline, `pipeline.run` > `component.run` > `agent.run` > `agent.step` > one
model call), through both front doors (`_span_trees`): the span that says it is an agent and
records its own question and answer is scored, not the program's top span; with no such span
(a step wrapper that records nothing, a user agent attribute) one turn is never scored."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

from _span_trees import Node, both, chat, through_the_gateway
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.trace import SpanKind

_NAMESPACES = st.sampled_from(["haystack", "acme", "llmkit", "orbit.trace"])
_SYSTEM = "SYSTEM PROMPT: answer briefly."


def _shaped_call(question: str, answer: str) -> Node:
    """A model call with no marker, found by its shape (chat messages in, a reply out)."""
    return Node("model.generate", {
        "llm.input": json.dumps({"messages": [{"role": "system", "content": _SYSTEM},
                                              {"role": "user", "content": question}]}),
        "llm.output": json.dumps({"replies": [{"role": "assistant", "content": answer}]})})


def _agent(name: str, keys: tuple[str, str], question: str, answer: str | None,
           inner: Node) -> Node:
    """The agent span: its own question and answer under generic keys (`answer` None: no
    content of its own)."""
    attributes: dict[str, Any] = {"test.node": "agent"}
    if answer is not None:
        exchange = [{"role": "system", "content": _SYSTEM},
                    {"role": "user", "content": question},
                    {"role": "assistant", "content": answer}]
        attributes[keys[0]] = json.dumps({"messages": exchange[1:2]})
        attributes[keys[1]] = json.dumps({"messages": exchange})
    return Node(name, attributes, [inner])


@st.composite
def _programs(draw: st.DrawFn) -> tuple[Node, tuple[str, str] | None, bool]:
    """(a program with one agent inside it, the (question, answer) its agent span is scored on
    or None, whether its model call carries GenAI markers)."""
    ns = draw(_NAMESPACES)
    question = f"Which river flows through {draw(st.sampled_from(['Vienna', 'Lyon']))}?"
    answer = draw(st.sampled_from(["The Danube.", "The Rhône and the Saône."]))
    marked = draw(st.booleans())
    call = chat(question, answer, _SYSTEM) if marked else _shaped_call(question, answer)
    if draw(st.booleans()):  # each turn in a step span that says "agent" and records nothing
        call = Node(f"{ns}.agent.step", {f"{ns}.agent.step": 0}, [call])
    name, keys = draw(st.sampled_from([
        (f"{ns}.agent.run", (f"{ns}.agent.input", f"{ns}.agent.output")),
        ("invokeAgent", (f"{ns}.spanInputs", f"{ns}.spanOutputs")),
        ("geo", (f"{ns}.agent:input", f"{ns}.agent:output")),
    ]))
    own = draw(st.booleans())
    agent = _agent(name, keys, question, answer if own else None, call)
    for _ in range(draw(st.integers(0, 2))):  # plain spans between the program and the agent
        agent = Node(f"{ns}.component.run", {f"{ns}.component.name": "agent",
                                             f"{ns}.component.type": "Agent"}, [agent])
    siblings = [Node(f"{ns}.component.run", {f"{ns}.component.name": "prompt_builder"})]
    kind = draw(st.sampled_from([SpanKind.INTERNAL, SpanKind.SERVER]))
    top = Node(f"{ns}.pipeline.run", {"test.node": "top", "user_agent.original": "curl/8"},
               [*siblings, agent], kind=kind, remote_parent=kind == SpanKind.SERVER)
    return top, (question, answer) if own else None, marked


def _copy(node: Node) -> Node:
    return Node(node.name, dict(node.attributes), [_copy(c) for c in node.children], node.kind,
                node.remote_parent)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_programs())
def test_an_agent_inside_a_program_with_one_model_turn_is_scored_on_its_own_span(
        case: tuple[Node, tuple[str, str] | None, bool]) -> None:
    """The agent span is scored once on the user's question and the answer (never the system
    prompt); the program's top span is not. An agent span that records nothing of its own
    leaves the rule of the loop's top: a GenAI model call scores the top span, one found only
    by its shape scores nothing (one turn under a span that does not say it is an agent)."""
    tree, judged, marked = case
    question, answer = _texts(tree)
    for found in both(lambda: [_copy(tree)]):
        if judged is not None:
            assert (found.scored, found.seen, found.unreadable) == (
                ["agent"], [judged], Counter())
        elif marked:
            assert (found.scored, found.seen, found.unreadable) == (
                ["top"], [(question, answer)], Counter())
        else:
            assert (found.scored, found.seen, found.unreadable) == ([], [], Counter())


def _texts(tree: Node) -> tuple[str, str]:
    """The (question, answer) of the one model call in `tree`."""
    node = tree
    while node.children:
        node = node.children[-1]
    if "llm.input" in node.attributes:
        conversation = json.loads(node.attributes["llm.input"])["messages"]
        reply = json.loads(node.attributes["llm.output"])["replies"][0]["content"]
        return conversation[-1]["content"], reply
    conversation = json.loads(node.attributes["gen_ai.input.messages"])
    reply = json.loads(node.attributes["gen_ai.output.messages"])
    return conversation[-1]["parts"][0]["content"], reply[0]["parts"][0]["content"]


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_programs(), seed=st.integers(0, 1000))
def test_the_gateway_finds_the_nested_agent_in_any_order_of_one_batch(
        case: tuple[Node, tuple[str, str] | None, bool], seed: int) -> None:
    """All the spans in one request in any order (a collector's batch): the same call."""
    tree, judged, _ = case
    found = through_the_gateway([_copy(tree)], shuffled=seed)
    if judged is not None:
        assert (found.scored, found.seen) == (["agent"], [judged])


def test_a_conventions_node_named_agent_keeps_its_conventions_rules() -> None:
    """A graph whose `agent` node is an OpenInference CHAIN recording the question in and the
    reply out under generic keys: a convention's span keeps its convention's rules (the rule
    above is for spans no convention reads): the graph's root is scored, once, in both doors."""
    question, answer = "Which river flows through Vienna?", "The Danube."

    def trees() -> list[Node]:
        node = Node("agent", {"openinference.span.kind": "CHAIN",
                              "graph.node.input": json.dumps([{"role": "user",
                                                               "content": question}]),
                              "graph.node.output": json.dumps(answer)},
                    [chat(question, answer, _SYSTEM)])
        return [Node("LangGraph", {"openinference.span.kind": "CHAIN", "test.node": "top"},
                     [node])]

    for found in both(trees):
        assert (found.scored, found.seen) == (["top"], [(question, answer)])


def test_an_agent_span_held_across_a_restart_is_read_from_its_own_keys(tmp_path: Path) -> None:
    """Its model call was in the buffer of the gateway that stopped: the agent span found by the
    trace's shape records its own question and answer, so the next gateway scores it on them."""
    from _span_trees import engine, sent_requests

    from tracescore.gateway._journal import HELD, Journal

    question, answer = "Which river flows through Vienna?", "The Danube."
    journal = Journal(tmp_path / "journal.db")
    agent = _agent("haystack.agent.run", ("haystack.agent.input", "haystack.agent.output"),
                   question, answer, _shaped_call(question, answer))
    _, held = sent_requests([Node("haystack.pipeline.run", {}, [agent])])[:2]
    journal.add([(HELD, 1, held.SerializeToString())])
    with engine(llm_wait_s=0.05, journal=journal) as (built, scorer, output, metrics):
        assert built.replay() == 1
        deadline = time.monotonic() + 10
        while built.held and time.monotonic() < deadline:
            time.sleep(0.01)
    [request] = output.requests
    [span] = request.resource_spans[0].scope_spans[0].spans
    assert span.name == "haystack.agent.run"
    assert scorer.seen == [(question, answer)]
    assert metrics.labelled("unreadable_agent_spans") == {}
    journal.close()
