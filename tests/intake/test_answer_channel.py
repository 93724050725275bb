"""Tool calls as scorers see them (issue 34, item 2, families e and f), through both front doors:

- a tool call's arguments are its own, without the call wrapper a framework records
  (smolagents through OpenInference: `{"args": [], "sanitize_inputs_outputs": true, "kwargs":
  {...}}`; LlamaIndex: `{"kwargs": {...}}`; a lone positional argument object `{"args": [{...}]}`);
- the tool call that hands the agent's answer over (smolagents' `final_answer`, pydantic-ai's
  output function, any tool whose argument is the answer, as the agent's last tool call) is the
  answer channel: no context (else faithfulness would judge the answer against itself), no tool
  call and no step of the run's trajectory; it stays in the run's timeline. A tool whose result
  the agent repeats word for word is still context.

Generated agent calls (OpenInference and GenAI conventions, answer channels of each shape or
none) run through the span processor and through a gateway; call and run scorers record what
they were given."""

from __future__ import annotations

import contextlib
import itertools
import json
import secrets
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _span_trees import Node, run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from test_unwrap import TEXT

import tracescore
from tracescore import _semconv as sc
from tracescore.online.intake._answer_channel import delivers
from tracescore.online.intake._unwrap import call_arguments
from tracescore.scoring import Scorer, ScoreResult, ScorerInput
from tracescore.scoring._inputs import answer_text, question_text
from tracescore.scoring._runs import TOOL_CALL, Step
from tracescore.testing import OTLPReceiver

_KEY = st.sampled_from(["city", "place", "query", "units", "limit", "days"])
_VALUE = st.one_of(TEXT, st.integers(0, 99), st.booleans())
KWARGS = st.dictionaries(_KEY, _VALUE, min_size=1, max_size=3)


def _wrapped(kwargs: dict[str, Any], style: str) -> dict[str, Any]:
    """A call's keyword arguments in the wrapper one framework records them in."""
    if style == "smolagents":
        return {"args": [], "sanitize_inputs_outputs": True, "kwargs": kwargs}
    if style == "llama_index":
        return {"kwargs": kwargs}
    if style == "positional_object":
        return {"args": [kwargs]}
    if style == "traceloop":
        return {"args": [], "kwargs": kwargs}
    return kwargs


WRAPPERS = st.sampled_from(["smolagents", "llama_index", "positional_object", "traceloop",
                            "plain"])


@settings(max_examples=200, deadline=None)
@given(KWARGS, WRAPPERS)
def test_a_tool_calls_arguments_are_its_keyword_arguments_in_any_wrapper(
        kwargs: dict[str, Any], style: str) -> None:
    assert call_arguments(_wrapped(kwargs, style)) == kwargs


@pytest.mark.parametrize("own", [
    {"args": "ls -la", "cwd": "/tmp"},  # a shell tool's own `args` argument
    {"args": ["a", "b"], "mode": "fast"},
    {"kwargs": "not a mapping"},
    ["Paris"],
    "Paris",
])
def test_a_tools_own_arguments_named_args_are_no_wrapper(own: Any) -> None:
    assert call_arguments(own) == own


@settings(max_examples=200, deadline=None)
@given(TEXT, KWARGS, WRAPPERS)
def test_a_tool_delivers_the_answer_when_its_argument_is_the_answer(
        answer: str, other: dict[str, Any], style: str) -> None:
    answer = "» " + answer  # no value of `other` is the answer
    assert delivers(json.dumps(_wrapped({"answer": answer}, style)), answer)
    assert delivers({"answer": f"  {answer}\n"}, answer)  # whitespace aside
    assert delivers(json.dumps(_wrapped({"city": answer, "n": None}, style)), answer)
    assert not delivers(json.dumps(_wrapped({**other, "answer": answer, "x": 1}, style)),
                        answer)
    assert not delivers(json.dumps(_wrapped(other, style)), answer)
    assert not delivers({"answer": answer}, "")  # no answer: nothing delivers it


# --- both doors ---------------------------------------------------------------------------------
Reading = tuple[Any, ...]


class _Calls(Scorer):
    """Keeps each call's question, answer, tool calls (name, arguments) and context."""

    id = "calls"
    name = "calls"
    uses_judge = False

    def __init__(self) -> None:
        self.seen: list[Reading] = []
        self._lock = threading.Lock()

    async def evaluate(self, call: ScorerInput) -> ScoreResult:
        reading = (question_text(call.input), answer_text(call.output),
                   tuple((t.name, json.dumps(t.arguments, sort_keys=True))
                         for t in call.tool_calls), tuple(call.context))
        with self._lock:
            self.seen.append(reading)
        return ScoreResult(run_id=call.run_id or "", scorer_id=self.id, scorer_name=self.name,
                           score=1.0)


def _tools(steps: tuple[Step, ...]) -> tuple[str, ...]:
    out: list[str] = []
    for step in steps:
        out.extend([step.name] if step.type == TOOL_CALL else [])
        out.extend(_tools(step.children))
    return tuple(out)


class _Runs(_Calls):
    """Keeps each run's question, its steps' names and the tool calls in its timeline."""

    id = "runs"
    name = "runs"
    scope = "run"

    async def evaluate(self, call: ScorerInput) -> ScoreResult:
        run_ = call.trajectory
        with self._lock:
            self.seen.append((question_text(call.input), tuple(s.name for s in run_.steps),
                              _tools(run_.timeline)))
        return ScoreResult(run_id=call.run_id or "", scorer_id=self.id, scorer_name=self.name,
                           score=1.0)


CHANNELS = ["none", "final_answer", "submit_tool", "output_function"]


@st.composite
def agent_call(draw: st.DrawFn) -> dict[str, Any]:
    """An agent call: its question and answer, its tool calls (arguments in some wrapper, a
    result that may be the answer word for word) and how it hands its answer over."""
    tools = [{"name": f"lookup{n}", "kwargs": draw(KWARGS), "style": draw(WRAPPERS),
              "result": draw(TEXT)} for n in range(draw(st.integers(0, 2)))]
    # "»": no argument drawn is the answer by chance (that tool would hand it over)
    case = {"question": draw(TEXT), "answer": "» " + draw(TEXT), "tools": tools,
            "channel": draw(st.sampled_from(CHANNELS)),
            "convention": draw(st.sampled_from(["openinference", "genai"]))}
    repeats = draw(st.booleans())
    if tools and repeats:
        tools[-1]["result"] = case["answer"]  # the agent repeats a tool's result: still context
    return case


def _tool_node(convention: str, name: str, arguments: Any, result: str,
               extra: dict[str, Any] | None = None) -> Node:
    if convention == "openinference":
        attributes = {sc.OI_SPAN_KIND: "TOOL", sc.OI_TOOL_NAME: name,
                      sc.OI_INPUT_VALUE: json.dumps(arguments), sc.OI_OUTPUT_VALUE: result}
        return Node(f"{name} tool", {**attributes, **(extra or {})})
    attributes = {sc.GEN_AI_OPERATION_NAME: "execute_tool", sc.GEN_AI_TOOL_NAME: name,
                  sc.GEN_AI_TOOL_CALL_ARGUMENTS: json.dumps(arguments),
                  sc.GEN_AI_TOOL_CALL_RESULT: result}
    return Node(f"execute_tool {name}", {**attributes, **(extra or {})})


def _tree(case: dict[str, Any]) -> Node:
    question, answer, convention = case["question"], case["answer"], case["convention"]
    children = [_tool_node(convention, t["name"], _wrapped(t["kwargs"], t["style"]), t["result"])
                for t in case["tools"]]
    channel = case["channel"]
    if channel == "final_answer":  # smolagents: FinalAnswerTool, its argument the answer
        children.append(_tool_node(convention, "final_answer", _wrapped(
            {"answer": answer}, "smolagents"), answer))
    elif channel == "submit_tool":  # any tool handed the answer as its only argument
        children.append(_tool_node(convention, "respond_to_user", {"message": answer}, "sent"))
    elif channel == "output_function":  # pydantic-ai: an output function turns it into the answer
        children.append(_tool_node("genai", "final_result", {"city": "x", "rank": 1},
                                   json.dumps(answer), {
                                       sc.LOGFIRE_MSG: "running output function: final_result"}))
    if convention == "openinference":
        attributes = {sc.OI_SPAN_KIND: "AGENT", sc.OI_AGENT_NAME: "geo",
                      sc.OI_INPUT_VALUE: json.dumps({"task": question, "stream": False,
                                                     "reset": True}),
                      sc.OI_OUTPUT_VALUE: answer}
    else:
        attributes = {sc.GEN_AI_OPERATION_NAME: "invoke_agent", sc.GEN_AI_AGENT_NAME: "geo",
                      sc.GEN_AI_INPUT_MESSAGES: json.dumps([
                          {"role": "user", "parts": [{"type": "text", "content": question}]}]),
                      sc.GEN_AI_OUTPUT_MESSAGES: json.dumps([
                          {"role": "assistant", "parts": [{"type": "text",
                                                           "content": answer}]}])}
    return Node("geo.run", attributes, children)


def _expected(cases: list[dict[str, Any]]) -> tuple[list[Reading], list[Reading]]:
    calls, runs = [], []
    for case in cases:
        tools = case["tools"]
        calls.append((case["question"], case["answer"],
                      tuple((t["name"], json.dumps(t["kwargs"], sort_keys=True)) for t in tools),
                      tuple(t["result"] for t in tools)))
        channel = {"none": (), "final_answer": ("final_answer",),
                   "submit_tool": ("respond_to_user",),
                   "output_function": ("final_result",)}[case["channel"]]
        names = tuple(t["name"] for t in tools)
        runs.append((case["question"], names, names + channel))
    return sorted(calls, key=repr), sorted(runs, key=repr)


def _through_the_processor(cases: list[dict[str, Any]], tree: Any = None
                           ) -> tuple[list[Reading], ...]:
    tree = tree or _tree
    calls, runs = _Calls(), _Runs()
    provider = TracerProvider()
    provider.add_span_processor(tracescore.ScoringSpanProcessor(
        SimpleSpanProcessor(InMemorySpanExporter()), [calls, runs],
        recognise=tracescore.build_recognisers(), isolation="thread"))
    for case in cases:
        run(provider.get_tracer("agents"), tree(case))
    assert provider.force_flush(30_000)
    provider.shutdown()
    return sorted(calls.seen, key=repr), sorted(runs.seen, key=repr)


class _FreshIds(IdGenerator):
    """Ids from the system's randomness: hypothesis seeds `random`, which would give every
    example the ids of the one before (the same trace, to a gateway that still holds it)."""

    def generate_span_id(self) -> int:
        return secrets.randbits(64) or 1

    def generate_trace_id(self) -> int:
        return secrets.randbits(128) or 1


class _Gateway:
    """One gateway for the module, its recording scorers cleared between examples."""

    def __init__(self, folder: Path, receiver: OTLPReceiver) -> None:
        from tracescore.gateway import Gateway, GatewayConfig

        self.calls, self.runs, self.receiver = _Calls(), _Runs(), receiver
        self.gateway = Gateway(GatewayConfig(
            grpc_endpoint="127.0.0.1:0", http_endpoint="127.0.0.1:0",
            health_endpoint="127.0.0.1:0", exporter_endpoint=receiver.grpc_endpoint,
            journal_path=str(folder / "journal.db"), scorers=[self.calls, self.runs],
            isolation="thread", shutdown_timeout_s=10.0, runs={"quiet_s": 0.2})).start()

    def read(self, cases: list[dict[str, Any]], tree: Any = None) -> tuple[list[Reading], ...]:
        tree = tree or _tree
        self.calls.seen.clear()
        self.runs.seen.clear()
        self.receiver.clear()
        provider = TracerProvider(id_generator=_FreshIds())
        provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(
            endpoint=f"http://127.0.0.1:{self.gateway.http_port}/v1/traces")))
        for case in cases:
            run(provider.get_tracer("agents"), tree(case))
        provider.shutdown()
        spans = sum(1 + len(tree(c).children) for c in cases)
        self.receiver.wait_for_spans(spans, timeout=30)
        asked = {case["question"] for case in cases}  # a late reading of an earlier example's
        deadline = time.monotonic() + 30              # calls is not one of these

        def seen() -> tuple[list[Reading], ...]:
            return tuple(sorted((r for r in s.seen if r[0] in asked), key=repr)
                         for s in (self.calls, self.runs))

        while time.monotonic() < deadline and any(len(r) < len(cases) for r in seen()):
            time.sleep(0.02)
        return seen()


_EXAMPLES = itertools.count()


def numbered(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The cases with questions no earlier example asked (a gateway's module-wide scorers may
    still see a late reading of an earlier example's calls)."""
    example = next(_EXAMPLES)
    return [dict(case, question=f"{example}.{n} {case['question']}")
            for n, case in enumerate(cases)]


@contextlib.contextmanager
def running_gateway(folder: Path) -> Iterator[_Gateway]:
    """A `_Gateway` sending to a receiver of its own, stopped when the block ends."""
    with OTLPReceiver() as receiver:
        built = _Gateway(folder, receiver)
        try:
            yield built
        finally:
            built.gateway.stop(timeout_s=5)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Gateway]:
    with running_gateway(tmp_path_factory.mktemp("answer-channel")) as built:
        yield built


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(agent_call(), min_size=8, max_size=8, unique_by=lambda c: c["question"]))
def test_both_doors_give_scorers_the_tools_own_arguments_and_no_answer_channel(
        gateway: _Gateway, cases: list[dict[str, Any]]) -> None:
    cases = numbered(cases)
    expected = _expected(cases)
    assert _through_the_processor(cases) == expected
    assert gateway.read(cases) == expected
