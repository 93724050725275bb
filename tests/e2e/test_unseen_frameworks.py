"""Agents from libraries tracescore was never written for come out scored through `tracescore
serve` and the span processor, on the user's question and the agent's answer, with no code: smolagents
with nothing configured, MLflow and Haystack with the mapping docs/gateway.md gives for them.

The real libraries (smolagents with OpenInference, Haystack with its own OpenTelemetry tracer,
functions traced by MLflow) run in one cached side venv (`rigs/agents/unseen_agents.py`) with a
scripted model that calls a tool and then answers, with and without a system prompt; they export
to a real gateway process, which forwards to the project's OTLP receiver and judges relevancy
through litellm at the stub judge. The judge's requests show what was judged. What each library
does that no known convention does:

- smolagents: the agent span's input is the JSON of `run`'s keyword arguments
  (`{"task": "...", "stream": false, "reset": true, "images": null, ...}`);
- Haystack: no GenAI attribute on any span; content as serialised chat messages under
  `haystack.agent.input` / `.output`, the model turns as `haystack.agent.step.llm` spans;
- MLflow: the span type and the content JSON-encoded (`mlflow.spanType="\\"AGENT\\""`,
  `mlflow.spanInputs='{"question": "..."}'`, `mlflow.spanOutputs='"..."'`);
- AutoGen AgentChat (0.7.5): GenAI `invoke_agent geo` / `execute_tool lookup` spans with names,
  descriptions and ids only: no question, answer, arguments or result anywhere, and no switch
  to record them (its content goes to Python logging only); its misses are counted and
  explained, and with its OpenAI model client traced by OpenTelemetry's OpenAI instrumentation
  it is scored from those model calls, its tool calls' arguments and results read from their
  messages by call id.
"""

from __future__ import annotations

import itertools
import json
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from _reach import (
    gateway_fixtures,
    judge,
    judged_pairs,
    relevancy_gateway,
    relevancy_options,
    unreadable_counts,
)
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from rigs.unseen import RUNNER, unseen_venv
from test_reach_node import assert_scored
from test_reach_openai_agents import replay

import tracescore
from tracescore import _semconv as sc
from tracescore.scoring import Scorer, ScoreResult, ScorerInput
from tracescore.scoring._inputs import question_text
from tracescore.testing import (
    GatewayProcess,
    OTLPReceiver,
    ReceivedSpan,
    Reply,
    StubLLMServer,
)
from tracescore.testing._decode import spans_from_otlp_json

pytestmark = pytest.mark.slow

# framework -> the name of the span a user of it looks at for one agent call
AGENT_SPANS: dict[str, str] = {
    "smolagents": "geo.run",
    "haystack": "haystack.agent.run",
    "mlflow": "geo",
}
_QUESTIONS = ["Which river flows through {}?", "What is the capital of {}?",
              "Name one museum in {}.", "How many bridges does {} have?"]
_PLACES = ["Vienna", "Kraków", "São Paulo", "Zürich", "Lyon", "Osaka", "Quito", "Tartu"]
_ANSWERS = ["The Danube.", "It is {}.", "About forty, in {}.", "The main museum of {}."]


def generated_cases(seed: int, count: int) -> list[dict[str, Any]]:
    """Questions and answers, half with a system prompt; two calls in three call the tool first
    (its result a text the question must not contain)."""
    rng = random.Random(seed)
    cases: list[dict[str, Any]] = []
    for index in range(count):
        place = rng.choice(_PLACES)
        case: dict[str, Any] = {"question": f"{index}. " + rng.choice(_QUESTIONS).format(place),
                                "answer": rng.choice(_ANSWERS).format(place)}
        if rng.random() < 0.5:
            case["system"] = f"SYSTEM-PROMPT {seed}-{index}: answer in one short sentence."
        if index % 3 != 2:
            case["tool"] = {"argument": place, "result": f"TOOL-RESULT {index} about {place}"}
        cases.append(case)
    return cases


@pytest.fixture(scope="module")
def side_python() -> Path:
    return unseen_venv() / "bin" / "python"


# The documented mappings (docs/gateway.md, "Frameworks without GenAI markers") for the two
# libraries whose agent spans carry no marker a built-in convention knows: no code.
MAPPINGS: list[dict[str, Any]] = [
    {"name": "mlflow", "attributes": {"mlflow.spanType": '"AGENT"'},
     "input": "mlflow.spanInputs", "output": "mlflow.spanOutputs"},
    {"name": "haystack", "span_name": r"haystack\.agent\.run",
     "input": "haystack.agent.input", "output": "haystack.agent.output"},
]
receiver, stub, gateway = gateway_fixtures(
    "recognise:\n  mappings: " + json.dumps(MAPPINGS) + "\n")


def run_through_gateway(framework: str, cases: list[dict[str, Any]], side_python: Path,
                        gateway: GatewayProcess, receiver: OTLPReceiver,
                        stub: StubLLMServer, keep: Path | None = None,
                        model_url: str | None = None
                        ) -> tuple[list[ReceivedSpan], list[ReceivedSpan]]:
    """Run the cases through the real library, exporting to the gateway; (sent, received).
    `keep`: where to copy what was sent (OTLP JSON lines); `model_url`: the agent's model
    server, for runners that call one."""
    receiver.clear()
    stub.clear()
    with tempfile.TemporaryDirectory(prefix="tracescore-unseen-") as tmp:
        cases_file, tee = Path(tmp) / "cases.json", Path(tmp) / "sent.jsonl"
        cases_file.write_text(json.dumps(cases), encoding="utf-8")
        done = subprocess.run(
            [str(side_python), str(RUNNER), framework, str(cases_file),
             f"http://127.0.0.1:{gateway.http_port}", str(tee)],
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(RUNNER.parent),
                 "PYTHONDONTWRITEBYTECODE": "1",
                 **({"UNSEEN_MODEL_URL": model_url} if model_url else {})},
            capture_output=True, text=True, timeout=300, cwd=tmp, check=False)
        assert done.returncode == 0, done.stderr[-4000:]
        sent = [s for line in tee.read_text().splitlines() for s in spans_from_otlp_json(line)]
        if keep is not None:
            keep.write_text(tee.read_text(encoding="utf-8"), encoding="utf-8")
    received = receiver.wait_for_spans(len(sent), timeout=120)
    return sent, received


@pytest.mark.parametrize("framework", sorted(AGENT_SPANS))
def test_agents_of_unseen_frameworks_are_scored_on_the_users_text(
        framework: str, side_python: Path, gateway: GatewayProcess, receiver: OTLPReceiver,
        stub: StubLLMServer) -> None:
    """Each agent call is scored once, on the span the user looks at, judged on the question and
    the final answer (no system prompt, tool return, JSON of arguments or message object); every
    span arrives unchanged."""
    cases = generated_cases(seed=len(framework), count=6)
    sent, received = run_through_gateway(framework, cases, side_python, gateway, receiver, stub)
    recorded = json.dumps([list(s.attributes.values()) for s in sent], ensure_ascii=False)
    assert all(case["tool"]["result"] in recorded for case in cases if "tool" in case)
    assert_scored(sent, received, {AGENT_SPANS[framework]}, stub,
                  [(c["question"], c["answer"]) for c in cases])


class ToolsGiven(Scorer):
    """Keeps, per question, the tool calls (name, arguments) and the context a scorer gets."""

    id = "tools-given"
    name = "tools given"
    uses_judge = False

    def __init__(self) -> None:
        self.seen: dict[str, tuple[list[tuple[str, Any]], list[str]]] = {}
        self.errors: dict[str, list[str | None]] = {}  # the tool calls' errors
        self._lock = threading.Lock()

    async def evaluate(self, call: ScorerInput) -> ScoreResult:
        with self._lock:
            self.seen[question_text(call.input)] = (
                [(t.name, t.arguments) for t in call.tool_calls], list(call.context))
            self.errors[question_text(call.input)] = [t.error for t in call.tool_calls]
        return ScoreResult(run_id=call.run_id or "", scorer_id=self.id, scorer_name=self.name,
                           score=1.0)


def replay_in_process(sent: list[ReceivedSpan], stub: StubLLMServer,
                      given: ToolsGiven | None = None,
                      mappings: list[dict[str, Any]] = MAPPINGS) -> list[str]:
    """`sent` replayed through a span processor scoring relevancy at `stub` with the built-in
    recognisers after `mappings` (and `given`); the names of the spans that came out scored."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    scorer = tracescore.create_answer_relevancy_scorer(
        model="openai/judge-stub", api_base=stub.base_url, api_key="sk-test", timeout=30)
    provider.add_span_processor(tracescore.ScoringSpanProcessor(
        SimpleSpanProcessor(exporter), [scorer, *([given] if given else [])],
        recognise=tracescore.build_recognisers(mappings), isolation="thread"))
    replay(sent, provider)
    assert provider.force_flush(60_000)
    provider.shutdown()
    return [s.name for s in exporter.get_finished_spans()
            if any(e.name == sc.GEN_AI_EVALUATION_RESULT and e.attributes is not None
                   and e.attributes.get(sc.TS_SCORER_ID) == scorer.id for e in s.events)]


@pytest.mark.parametrize("framework", sorted(AGENT_SPANS))
def test_the_same_spans_are_scored_the_same_in_process(
        framework: str, side_python: Path, gateway: GatewayProcess, receiver: OTLPReceiver,
        stub: StubLLMServer) -> None:
    """The library's real spans replayed through an SDK pipeline, parents before children as the
    SDK ends them: the span processor scores the same spans on the same text as the gateway, and
    gives its scorers each library's tool calls (arguments as a mapping) and the tool's own
    return text as context."""
    cases = generated_cases(seed=7 + len(framework), count=4)
    sent, _ = run_through_gateway(framework, cases, side_python, gateway, receiver, stub)
    through_gateway = sorted(judged_pairs(stub))
    stub.clear()
    given = ToolsGiven()
    scored = replay_in_process(sent, stub, given)
    assert scored == [AGENT_SPANS[framework]] * len(cases)
    assert sorted(judged_pairs(stub)) == through_gateway == sorted(
        (c["question"], c["answer"]) for c in cases)
    for case in cases:  # the answer is never context: faithfulness would judge it by itself
        calls, context = given.seen[case["question"]]
        assert case["answer"] not in context, (calls, context)
        # the tool spans: smolagents' (OpenInference TOOL; `final_answer` hands the answer
        # over: no tool call; arguments without smolagents' call wrapper), Haystack's
        # (`haystack.agent.step.tool`, named by `haystack.tool.name`), MLflow's
        # (`mlflow.spanType='"TOOL"'`, content under `mlflow.spanInputs` / `.spanOutputs`)
        tool = case.get("tool")
        assert calls == ([("lookup", {"place": tool["argument"]})] if tool else [])
        assert context == ([tool["result"]] if tool else [])


def test_haystack_is_found_by_its_shape_and_inspect_writes_the_mapping_that_reads_it(
        side_python: Path, receiver: OTLPReceiver, stub: StubLLMServer, tmp_path: Path) -> None:
    """Haystack's model calls carry no GenAI attribute: with nothing configured, the gateway
    finds its agent loops by their shape (`haystack.agent.step.llm` spans recording chat
    messages in and assistant replies out) and scores `haystack.agent.run` on the user's text;
    `tracescore inspect` on the same spans shows them with a mapping entry, and that entry alone
    (no built-in convention, so no shape rules) gets them scored too."""
    cases = generated_cases(seed=11, count=4)
    pairs = [(c["question"], c["answer"]) for c in cases]
    sent_file = tmp_path / "sent.jsonl"
    (tmp_path / "plain").mkdir()
    with relevancy_gateway(tmp_path / "plain", receiver, stub) as plain:
        sent, received = run_through_gateway("haystack", cases, side_python, plain, receiver,
                                             stub, keep=sent_file)
    assert not any(k.startswith("gen_ai.") for s in sent for k in s.attributes)
    assert_scored(sent, received, {AGENT_SPANS["haystack"]}, stub, pairs)
    stub.clear()  # the span processor finds them the same way
    assert replay_in_process(sent, stub, mappings=[]) == [AGENT_SPANS["haystack"]] * len(cases)
    assert sorted(judged_pairs(stub)) == sorted(pairs)

    shown = subprocess.run([sys.executable, "-m", "tracescore", "inspect", "--json",
                            str(sent_file)], capture_output=True, text=True, timeout=120,
                           check=True)
    reports = json.loads(shown.stdout)["agent_spans"]
    assert [(r["name"], r["question"], r["answer"]) for r in reports] == [
        (AGENT_SPANS["haystack"], q, a) for q, a in pairs]
    mapping = reports[0]["mapping"]
    assert all(r["mapping"] == mapping for r in reports)

    (tmp_path / "mapped").mkdir()
    config = "recognise:\n  builtins: false\n  mappings: " + json.dumps([mapping]) + "\n"
    with relevancy_gateway(tmp_path / "mapped", receiver, stub, config) as mapped:
        sent, received = run_through_gateway("haystack", cases, side_python, mapped, receiver,
                                             stub)
    assert_scored(sent, received, {AGENT_SPANS["haystack"]}, stub, pairs)


def test_a_haystack_agent_inside_a_pipeline_answering_in_one_turn_is_scored_on_its_span(
        side_python: Path, receiver: OTLPReceiver, stub: StubLLMServer, tmp_path: Path) -> None:
    """Haystack's Agent as one component of a Pipeline, one model turn: the trace's top span is
    `haystack.pipeline.run`, which does not say it is an agent; with nothing configured the
    agent's own span (`haystack.agent.run`, below `haystack.component.run`) is scored on the
    user's text, through the gateway and in process, and the pipeline's is not; `tracescore
    inspect` shows the same."""
    cases = [{k: v for k, v in c.items() if k != "tool"} for c in generated_cases(13, 4)]
    pairs = [(c["question"], c["answer"]) for c in cases]
    sent_file = tmp_path / "sent.jsonl"
    with relevancy_gateway(tmp_path, receiver, stub) as plain:
        sent, received = run_through_gateway("haystack-pipeline", cases, side_python, plain,
                                             receiver, stub, keep=sent_file)
    assert {s.name for s in sent} >= {"haystack.pipeline.run", "haystack.component.run",
                                      AGENT_SPANS["haystack"], "haystack.agent.step.llm"}
    assert_scored(sent, received, {AGENT_SPANS["haystack"]}, stub, pairs)
    stub.clear()
    assert replay_in_process(sent, stub, mappings=[]) == [AGENT_SPANS["haystack"]] * len(cases)
    assert sorted(judged_pairs(stub)) == sorted(pairs)
    shown = subprocess.run([sys.executable, "-m", "tracescore", "inspect", "--json",
                            str(sent_file)], capture_output=True, text=True, timeout=120,
                           check=True)
    assert [(r["name"], r["question"], r["answer"]) for r in json.loads(shown.stdout)[
        "agent_spans"]] == [(AGENT_SPANS["haystack"], q, a) for q, a in pairs]


# --- Haystack's tool calls ---------------------------------------------------------------------
def _shown_judge(request: Any) -> Reply:
    """`_reach.judge`, and a pass for the LLM judge's verdict step."""
    if request.get("response_format", {}).get("json_schema", {}).get(
            "name") == "llm_judge_verdict":
        return Reply(content={"reason": "It meets the criterion.", "verdict": "pass"})
    return judge(request)


def shown_to_the_judge(stub: StubLLMServer) -> dict[str, dict[str, Any]]:
    """Per question (its <input> block): the blocks of the LLM judge's verdict requests, JSON
    decoded but the input and output (a block absent: not shown)."""
    shown: dict[str, dict[str, Any]] = {}
    for request in stub.requests:
        if request.get("response_format", {}).get("json_schema", {}).get(
                "name") != "llm_judge_verdict":
            continue
        prompt = request.messages[-1]["content"]
        blocks = {m.group(1): m.group(2) for m in re.finditer(
            r"^<(input|output|context|tool_calls)>\n(.*?)\n</\1>$", prompt,
            re.DOTALL | re.MULTILINE)}
        for tag in ("context", "tool_calls"):
            if tag in blocks:
                blocks[tag] = json.loads(blocks[tag])
        shown[blocks["input"]] = blocks
    return shown


def test_haystacks_tool_calls_reach_the_scorers_with_their_arguments_and_the_tools_text(
        side_python: Path, receiver: OTLPReceiver, stub: StubLLMServer, tmp_path: Path) -> None:
    """Haystack's Agent calls a real `Tool` (its ToolInvoker, its own `haystack.agent.step.tool`
    span: the tool named by `haystack.tool.name`, no kind marker) before answering. With nothing
    configured, through `tracescore serve` and in process, each agent call is scored once on
    `haystack.agent.run`; its tool call is there with its name and arguments as a mapping, and
    the tool's own return text is the context scorers get (no message object or wrapper); the
    judged question and answer are the user's text and the final answer. A tool that fails
    (Haystack records its span unfailed, flagged by `haystack.tool.error`, its error as the
    result `{"error": ...}`) gives a failed tool call with Haystack's error text, and no context.
    """
    cases = generated_cases(seed=17, count=6)
    failing = [c for c in cases if "tool" in c][-1]
    failing["tool"]["fails"] = True
    judged = ("    - {scorer: llm-judge, options: {name: tools-shown, instructions: 'The tools "
              "fit the question.', include: [input, context, tool_calls], "
              + relevancy_options(stub)[1:] + "}\n")
    stub.responder = _shown_judge
    try:
        with relevancy_gateway(tmp_path, receiver, stub, judged) as plain:
            sent, received = run_through_gateway("haystack", cases, side_python, plain,
                                                 receiver, stub)
            shown = shown_to_the_judge(stub)
    finally:
        stub.responder = judge
    tools = [s for s in sent if s.name == "haystack.agent.step.tool"]
    assert len(tools) == sum("tool" in c for c in cases)  # the tool ran, in its own span
    assert {(s.trace_id, s.span_id) for s in received} == {(s.trace_id, s.span_id) for s in sent}
    scored = {s.name: sorted(str(e.attributes[sc.TS_SCORER_ID])
                             for e in s.events_named(sc.GEN_AI_EVALUATION_RESULT))
              for s in received if s.events_named(sc.GEN_AI_EVALUATION_RESULT)}
    assert scored == {AGENT_SPANS["haystack"]: ["answer-relevancy", "tools-shown"]}
    assert sum(bool(s.events_named(sc.GEN_AI_EVALUATION_RESULT)) for s in received) == len(cases)
    assert sorted(judged_pairs(stub)) == sorted((c["question"], c["answer"]) for c in cases)
    error = shown[failing["question"]]["tool_calls"][0].get("error", "")
    assert failing["tool"]["result"] in error and "Failed to invoke Tool" in error, shown
    expected = {}
    for case in cases:
        tool = case.get("tool")
        expected[case["question"]] = {"input": case["question"], "output": case["answer"]} | ({
            "tool_calls": [{"name": "lookup", "arguments": {"place": tool["argument"]},
                            "error": error}]} if case is failing else {
            "tool_calls": [{"name": "lookup", "arguments": {"place": tool["argument"]},
                            "result": tool["result"]}],
            "context": [tool["result"]]} if tool else {})
    assert shown == expected

    stub.clear()  # the span processor gives its scorers the same
    given = ToolsGiven()
    assert replay_in_process(sent, stub, given, mappings=[]) == [
        AGENT_SPANS["haystack"]] * len(cases)
    assert sorted(judged_pairs(stub)) == sorted((c["question"], c["answer"]) for c in cases)
    assert given.seen == {c["question"]: (
        [("lookup", {"place": c["tool"]["argument"]})],
        [] if c is failing else [c["tool"]["result"]]) if "tool" in c else ([], [])
        for c in cases}
    assert given.errors[failing["question"]] == [error]


# --- AutoGen AgentChat -------------------------------------------------------------------------
AUTOGEN_AGENT = "invoke_agent geo"
AUTOGEN_HINT = "AutoGen (autogen-core 0.7) records no prompt or answer on its spans"


def test_autogen_agents_record_no_content_and_every_miss_is_counted_and_explained(
        side_python: Path, receiver: OTLPReceiver, stub: StubLLMServer, tmp_path: Path) -> None:
    """AutoGen AgentChat's AssistantAgent (a FunctionTool called first, the replay model client)
    with its own OpenTelemetry tracing, through `tracescore serve` with nothing configured: its
    `invoke_agent geo` spans are found (GenAI markers) but carry no question or answer, its
    `execute_tool lookup` spans no arguments or result, and no model-call span is below them,
    so nothing can be judged. Every span goes on unchanged and unscored, nothing reaches the
    judge, each agent call is counted unreadable (genai, no_input_or_output), and the one
    warning, like `tracescore inspect`, says what AutoGen needs instead of listing other
    frameworks' switches. The span processor, given the same spans, scores none either."""
    cases = generated_cases(seed=23, count=6)
    sent_file = tmp_path / "sent.jsonl"
    with relevancy_gateway(tmp_path, receiver, stub) as plain:
        sent, received = run_through_gateway("autogen", cases, side_python, plain, receiver,
                                             stub, keep=sent_file)
        deadline = time.monotonic() + 60  # the agent spans wait a bounded time for model calls
        while time.monotonic() < deadline and unreadable_counts(plain).get(
                ("genai", "no_input_or_output"), 0) < len(cases):
            time.sleep(0.2)
        assert unreadable_counts(plain) == {("genai", "no_input_or_output"): len(cases)}
        warnings = [e.get("message", "") for e in plain.logs if AUTOGEN_HINT in e.get(
            "message", "")]
    agents = [s for s in sent if s.name == AUTOGEN_AGENT]
    tools = [s for s in sent if s.name == "execute_tool lookup"]
    assert len(agents) == len(cases) and len(tools) == sum("tool" in c for c in cases)
    assert {s.attributes.get("gen_ai.system") for s in agents + tools} == {"autogen"}
    assert all(t.parent_span_id in {a.span_id for a in agents} for t in tools)
    recorded = json.dumps([list(s.attributes.values()) + [e.name for e in s.events]
                           for s in sent], ensure_ascii=False)
    for case in cases:  # what real AutoGen 0.7.5 puts in its spans: none of the content
        assert case["question"] not in recorded and case["answer"] not in recorded
        assert "tool" not in case or case["tool"]["result"] not in recorded
    assert {(s.trace_id, s.span_id, s.name) for s in received} == {
        (s.trace_id, s.span_id, s.name) for s in sent}
    assert [s.name for s in received if s.events_named(sc.GEN_AI_EVALUATION_RESULT)] == []
    assert judged_pairs(stub) == []
    assert len(warnings) == 1 and "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT" in (
        warnings[0]) and "Semantic Kernel" not in warnings[0], warnings

    stub.clear()
    assert replay_in_process(sent, stub, mappings=[]) == []
    assert stub.requests == []
    shown = subprocess.run([sys.executable, "-m", "tracescore", "inspect", "--json",
                            str(sent_file)], capture_output=True, text=True, timeout=120,
                           check=True)
    reports = json.loads(shown.stdout)["agent_spans"]
    assert [(r["name"], r["scored"], r["reason"]) for r in reports] == [
        (AUTOGEN_AGENT, False, "no_input_or_output")] * len(cases)
    assert all(AUTOGEN_HINT in r["why"] for r in reports), reports[0]["why"]


def autogen_model(cases: list[dict[str, Any]]) -> Any:
    """The AutoGen agent's model (OpenAI chat completions): a `lookup` tool call first for
    cases with a tool, then the case's answer."""
    by_question = {case["question"]: case for case in cases}
    ids = itertools.count()

    def respond(request: Any) -> Reply:
        messages = request["messages"]
        case = by_question[next(m["content"] for m in messages if m["role"] == "user")]
        if "tool" in case and not any(m["role"] == "tool" for m in messages):
            arguments = json.dumps({"place": case["tool"]["argument"]})
            return Reply(tool_calls=[{"id": f"call_{next(ids)}", "type": "function",
                                      "function": {"name": "lookup", "arguments": arguments}}],
                         finish_reason="tool_calls")
        return Reply(content=case["answer"])

    return respond


def test_autogen_agents_are_scored_from_their_instrumented_model_calls(
        side_python: Path, receiver: OTLPReceiver, stub: StubLLMServer, tmp_path: Path) -> None:
    """The way AutoGen's agent calls become readable: its OpenAI model client traced by
    OpenTelemetry's OpenAI instrumentation with content capture (`SPAN_ONLY`), a scripted model
    server at the edge. With nothing configured, through `tracescore serve` and in process, each
    run is scored once on `invoke_agent geo` (not on its `chat` or `execute_tool` spans), judged
    on the user's task and the final reply, read from the `chat` spans below it. Its
    `execute_tool lookup` span names the tool and the call id only: the scorers still get the
    call with its arguments as a mapping, and the tool's own text as context, from the model
    calls' messages that carry the same call id."""
    cases = generated_cases(seed=29, count=6)
    pairs = [(c["question"], c["answer"]) for c in cases]
    judged = ("    - {scorer: llm-judge, options: {name: tools-shown, instructions: 'The tools "
              "fit the question.', include: [input, context, tool_calls], "
              + relevancy_options(stub)[1:] + "}\n")
    stub.responder = _shown_judge
    try:
        with StubLLMServer() as model, relevancy_gateway(tmp_path, receiver, stub,
                                                         judged) as plain:
            model.responder = autogen_model(cases)
            sent, received = run_through_gateway("autogen-openai", cases, side_python, plain,
                                                 receiver, stub, model_url=model.base_url)
            shown = shown_to_the_judge(stub)
    finally:
        stub.responder = judge
    tools = [s for s in sent if s.name == "execute_tool lookup"]
    assert len(tools) == sum("tool" in c for c in cases)
    assert not any(k.startswith(("gen_ai.tool.call.arguments", "gen_ai.tool.call.result"))
                   for s in tools for k in s.attributes)  # no arguments, no result recorded
    assert {(s.trace_id, s.span_id) for s in received} == {(s.trace_id, s.span_id) for s in sent}
    scored = {s.name: sorted(str(e.attributes[sc.TS_SCORER_ID])
                             for e in s.events_named(sc.GEN_AI_EVALUATION_RESULT))
              for s in received if s.events_named(sc.GEN_AI_EVALUATION_RESULT)}
    assert scored == {AUTOGEN_AGENT: ["answer-relevancy", "tools-shown"]}
    assert sum(bool(s.events_named(sc.GEN_AI_EVALUATION_RESULT)) for s in received) == len(cases)
    assert sorted(judged_pairs(stub)) == sorted(pairs)
    assert shown == {c["question"]: {"input": c["question"], "output": c["answer"]} | ({
        "tool_calls": [{"name": "lookup", "arguments": {"place": c["tool"]["argument"]},
                        "result": c["tool"]["result"]}],
        "context": [c["tool"]["result"]]} if "tool" in c else {}) for c in cases}

    stub.clear()
    given = ToolsGiven()
    assert replay_in_process(sent, stub, given, mappings=[]) == [AUTOGEN_AGENT] * len(cases)
    assert sorted(judged_pairs(stub)) == sorted(pairs)
    assert given.seen == {c["question"]: (
        [("lookup", {"place": c["tool"]["argument"]})], [c["tool"]["result"]])
        if "tool" in c else ([], []) for c in cases}
