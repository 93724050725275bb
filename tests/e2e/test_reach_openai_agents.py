"""The OpenAI Agents SDK's agent calls come out scored, through OpenInference and through logfire.

Both instrumentations write agent spans without content of their own (OpenInference: AGENT spans
with only `agent.name`; logfire: `Agent run: {name!r}` spans); the question and the answer are on
the model-call spans below them. The real SDK (`rigs/agents/reach_agents.py`, one cached
side venv) runs an agent with a tool against a chat-completions stub and exports over OTLP/HTTP to
a real `tracescore serve`, which forwards to the project's OTLP receiver and judges relevancy
through litellm at a stub judge. The judge's requests show what was judged: the question block
must be the user's last question (no system prompt, no tool return, no earlier turn) and the
statements the agent's final answer.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import re
import subprocess
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _reach import assert_spans_scored, gateway_fixtures, judged_pairs, relevancy_options
from opentelemetry import trace as trace_api
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from rigs.agents.reach_agents import INSTRUMENTATIONS
from rigs.side_envs import reach_agents_venv

import tracescore
from tracescore import _semconv as sc
from tracescore.testing import GatewayProcess, OTLPReceiver, ReceivedSpan, Reply, StubLLMServer
from tracescore.testing._decode import spans_from_otlp_json

pytestmark = pytest.mark.slow  # installs the Agents SDK in a side venv on first use (minutes)

RUNNER = Path(__file__).resolve().parents[1] / "rigs" / "agents" / "reach_agents.py"
LLM_WAIT_S = 1.0
_QUESTIONS = ["Which river flows through {}?", "What is the capital of {}?",
              "How old is the oldest bridge in {}?", "Name one museum in {}."]
_PLACES = ["Vienna", "Kraków", "São Paulo", "Zürich", "Lyon", "Osaka", "Quito", "Tartu"]
_ANSWERS = ["The Danube.", "It is {}.", "About 800 years, in {}.", "The main museum of {}.",
            '{{"city": "{}"}}']


def generated_cases(seed: int, count: int) -> list[dict[str, Any]]:
    """Questions and answers (one answer JSON text), with and without a system prompt (the
    agent's instructions), a tool round (its result a text the question must not contain),
    earlier turns passed as items, and runs that continue the previous run's items."""
    rng = random.Random(seed)
    cases: list[dict[str, Any]] = []
    for index in range(count):
        place = rng.choice(_PLACES)
        case: dict[str, Any] = {"question": f"{index}. " + rng.choice(_QUESTIONS).format(place),
                                "answer": rng.choice(_ANSWERS).format(place)}
        if rng.random() < 0.6:
            case["system"] = f"SYSTEM-PROMPT {index}: answer in one short sentence."
        if index % 3 != 1:
            case["tool"] = {"argument": place, "result": f"TOOL-RESULT {index} about {place}"}
        if index % 4 == 2:
            case["history"] = [{"role": "user", "content": f"EARLIER-TURN {index} about {place}?"},
                               {"role": "assistant", "content": "EARLIER-ANSWER."}]
        elif index % 4 == 3:
            case["continue"] = True  # the previous run's items, its tool round included
        cases.append(case)
    return cases


# --- the stubs ---------------------------------------------------------------------------------
def agent_model(cases: list[dict[str, Any]]) -> Any:
    """The agent's model: a tool call first for cases with a tool, then the case's answer."""
    by_question = {case["question"]: case for case in cases}
    ids = itertools.count()

    def respond(request: Any) -> Reply:
        messages = request["messages"]
        question = next(_text(m) for m in reversed(messages) if m["role"] == "user")
        case = by_question[question]
        if "tool" in case and messages[-1]["role"] != "tool":
            arguments = json.dumps({"topic": case["tool"]["argument"]})
            return Reply(tool_calls=[{"id": f"call_{next(ids)}", "type": "function", "function": {
                "name": "lookup", "arguments": arguments}}], finish_reason="tool_calls")
        return Reply(content=case["answer"])

    return respond


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content)
    return str(content)


def is_agent_span(span: ReceivedSpan) -> bool:
    """The agent's own span each instrumentation writes (without question or answer). The
    AGENT span OpenInference writes at the trace's root only contains it: it is not scored."""
    return ((span.attributes.get(sc.OI_SPAN_KIND) == "AGENT"
             and sc.OI_AGENT_NAME in span.attributes)
            or span.attributes.get("logfire.msg_template") == "Agent run: {name!r}")


def expected_pairs(instrumentation: str, cases: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """One agent span per run, judged on the run's question and answer (with either
    instrumentation)."""
    return [(case["question"], case["answer"]) for case in cases]


# --- fixtures ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def venv() -> Path:
    return reach_agents_venv()


receiver, stub, gateway = gateway_fixtures(f"trace:\n  llm_wait_s: {LLM_WAIT_S}\n")


@pytest.fixture(scope="module")
def model() -> Iterator[StubLLMServer]:
    with StubLLMServer() as running:
        yield running


def run_agents(instrumentation: str, cases: list[dict[str, Any]], venv: Path,
               model: StubLLMServer, otlp_url: str) -> list[ReceivedSpan]:
    """Run the cases through the real SDK under `instrumentation`, exporting to `otlp_url`;
    the spans it sent."""
    model.responder = agent_model(cases)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OTEL_", "LOGFIRE_", "OPENAI_"))}
    with tempfile.TemporaryDirectory(prefix="tracescore-agents-") as tmp:
        cases_file, tee = Path(tmp) / "cases.json", Path(tmp) / "sent.jsonl"
        cases_file.write_text(json.dumps(cases), encoding="utf-8")
        done = subprocess.run(
            [str(venv / "bin" / "python"), str(RUNNER), instrumentation, str(cases_file),
             model.base_url, otlp_url, str(tee)],
            env=env, capture_output=True, text=True, timeout=300, cwd=tmp, check=False)
        assert done.returncode == 0, done.stderr[-4000:]
        return [s for line in tee.read_text().splitlines() for s in spans_from_otlp_json(line)]


def assert_scored(sent: list[ReceivedSpan], received: list[ReceivedSpan],
                  judged: list[tuple[str, str]], expected: list[tuple[str, str]]) -> None:
    """Every span arrived once and unchanged; the agent spans with one evaluation (score 1),
    judged on `expected` (question, answer) pairs; no other span scored."""
    assert assert_spans_scored(sent, received, is_agent_span) == len(expected)
    assert sorted(judged) == sorted(expected)


# --- through the gateway -----------------------------------------------------------------------
_RUNS: dict[str, tuple[list[dict[str, Any]], list[ReceivedSpan], list[ReceivedSpan],
                       list[tuple[str, str]]]] = {}


def gateway_run(instrumentation: str, venv: Path, model: StubLLMServer, gateway: GatewayProcess,
                receiver: OTLPReceiver, stub: StubLLMServer
                ) -> tuple[list[dict[str, Any]], list[ReceivedSpan], list[ReceivedSpan],
                           list[tuple[str, str]]]:
    """(cases, spans sent, spans received, judged pairs) of one run of the SDK through the
    gateway per instrumentation (made once, shared by the tests of this module)."""
    if instrumentation not in _RUNS:
        cases = generated_cases(seed=len(instrumentation), count=8)
        receiver.clear()
        stub.clear()
        sent = run_agents(instrumentation, cases, venv, model,
                          f"http://127.0.0.1:{gateway.http_port}")
        received = receiver.wait_for_spans(len(sent), timeout=120)
        _RUNS[instrumentation] = cases, sent, received, judged_pairs(stub)
    return _RUNS[instrumentation]


@pytest.mark.parametrize("instrumentation", INSTRUMENTATIONS)
def test_agent_runs_are_scored_through_the_gateway(
        instrumentation: str, venv: Path, model: StubLLMServer, gateway: GatewayProcess,
        receiver: OTLPReceiver, stub: StubLLMServer) -> None:
    cases, sent, received, judged = gateway_run(instrumentation, venv, model, gateway, receiver,
                                                stub)
    tools = [s for s in sent if s.attributes.get(sc.OI_SPAN_KIND) == "TOOL"
             or s.attributes.get("logfire.msg_template") == "Function: {name}"]
    assert len(tools) == sum("tool" in c for c in cases)  # the tool ran, in its own span
    # the agent spans carry no content: no recogniser reads them on their own
    assert not any(is_agent_span(s) and tracescore.recognise(s.name, s.attributes) for s in sent)
    assert_scored(sent, received, judged, expected_pairs(instrumentation, cases))


# --- in process --------------------------------------------------------------------------------
def replay(spans: list[ReceivedSpan], provider: TracerProvider) -> dict[str, int]:
    """Start and end the spans through `provider` as the library did: same scopes, names,
    attributes and times, each under its parent, children ending before their parents; the
    new span id of each span, by its id."""
    by_id = {s.span_id: s for s in spans}

    def depth(span: ReceivedSpan) -> int:
        return 0 if span.parent_span_id not in by_id else 1 + depth(by_id[span.parent_span_id])

    started: dict[str, Any] = {}
    for span in sorted(spans, key=lambda s: (s.start_time_unix_nano, depth(s))):
        parent = started.get(span.parent_span_id or "")
        context = trace_api.set_span_in_context(parent) if parent is not None else None
        started[span.span_id] = provider.get_tracer(span.scope_name).start_span(
            span.name, context=context, attributes=span.attributes,
            start_time=span.start_time_unix_nano)
    for span in sorted(spans, key=lambda s: (s.end_time_unix_nano, -depth(s))):
        started[span.span_id].end(end_time=span.end_time_unix_nano)
    return {key: span.get_span_context().span_id for key, span in started.items()}


@pytest.mark.parametrize("instrumentation", INSTRUMENTATIONS)
def test_the_processor_scores_the_same_spans_in_process_as_the_gateway(
        instrumentation: str, venv: Path, model: StubLLMServer, gateway: GatewayProcess,
        receiver: OTLPReceiver, stub: StubLLMServer) -> None:
    """The spans the SDK sent to the gateway, replayed through an SDK pipeline with
    `recognise=`: the same agent spans are scored, judged on the same questions and answers."""
    cases, sent, _, judged = gateway_run(instrumentation, venv, model, gateway, receiver, stub)
    stub.clear()
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    scorer = tracescore.create_answer_relevancy_scorer(
        model="openai/judge-stub", api_base=stub.base_url, api_key="sk-test", timeout=30)
    provider.add_span_processor(tracescore.ScoringSpanProcessor(
        SimpleSpanProcessor(exporter), [scorer], recognise=tracescore.build_recognisers(),
        isolation="thread"))
    new_ids = replay(sent, provider)
    assert provider.force_flush(60_000)
    provider.shutdown()
    finished = exporter.get_finished_spans()
    assert len(finished) == len(sent)  # each span once
    events = {s.context.span_id: [e for e in s.events if e.name == sc.GEN_AI_EVALUATION_RESULT]
              for s in finished if s.context is not None}
    for span in sent:
        assert len(events[new_ids[span.span_id]]) == is_agent_span(span), span.name
    assert sorted(judged_pairs(stub)) == sorted(judged)
    assert len(judged) == len(expected_pairs(instrumentation, cases))


# --- the bounded wait --------------------------------------------------------------------------
def _request(spans: list[ReceivedSpan]) -> dict[str, Any]:
    """One OTLP/JSON export request holding `spans`, in this order."""
    return {"resourceSpans": [{"resource": {}, "scopeSpans": [
        {"scope": {"name": s.scope_name}, "spans": [_otlp_json(s)]} for s in spans]}]}


def _post(gateway: GatewayProcess, spans: list[ReceivedSpan]) -> None:
    request = urllib.request.Request(
        f"http://127.0.0.1:{gateway.http_port}/v1/traces", data=json.dumps(_request(spans)).encode(),
        headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=10) as reply:
        assert reply.status == 200


def _otlp_json(span: ReceivedSpan) -> dict[str, Any]:
    def value(v: Any) -> dict[str, Any]:
        if isinstance(v, bool):
            return {"boolValue": v}
        if isinstance(v, int):
            return {"intValue": str(v)}
        if isinstance(v, float):
            return {"doubleValue": v}
        if isinstance(v, (list, tuple)):
            return {"arrayValue": {"values": [value(x) for x in v]}}
        return {"stringValue": str(v)}

    out: dict[str, Any] = {
        "traceId": span.trace_id, "spanId": span.span_id, "name": span.name, "kind": 1,
        "startTimeUnixNano": str(span.start_time_unix_nano),
        "endTimeUnixNano": str(span.end_time_unix_nano),
        "attributes": [{"key": k, "value": value(v)} for k, v in span.attributes.items()]}
    if span.parent_span_id:
        out["parentSpanId"] = span.parent_span_id
    return out


def _metric(gateway: GatewayProcess, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{gateway.health_port}/metrics",
                                timeout=10) as reply:
        text = reply.read().decode()
    found = re.search(rf"^{name} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def test_an_agent_span_waits_a_bounded_time_for_llm_calls_that_arrive_after_it(
        venv: Path, model: StubLLMServer, gateway: GatewayProcess, receiver: OTLPReceiver,
        stub: StubLLMServer, tmp_path: Path) -> None:
    """The agent span in a request of its own before the spans below it: scored once they
    arrive. Without them it is forwarded unscored after `trace.llm_wait_s`, with the reason."""
    cases = [c for c in generated_cases(seed=5, count=4) if "continue" not in c][:2]
    sent = run_agents("openinference", cases, venv, model, receiver.http_endpoint)
    agents = [s for s in sent if s.attributes.get(sc.OI_AGENT_NAME) == "geo"]
    assert len(agents) == 2
    late, lost = agents
    late_trace = [s for s in sent if s.trace_id == late.trace_id
                  and s.span_id != late.span_id and not is_agent_span(s)]
    receiver.clear()
    stub.clear()
    waited = _metric(gateway, "tracescore_gateway_llm_wait_total")
    expired = _metric(gateway, "tracescore_gateway_llm_wait_expired_total")
    _post(gateway, [late])
    _post(gateway, [lost])
    _post(gateway, late_trace)  # its LLM calls (and the rest of its trace), later
    arrived = receiver.wait_for_spans(len(late_trace) + 2, timeout=30)
    received = {(s.trace_id, s.span_id): s for s in arrived}
    assert len(received) == len(arrived) == len(late_trace) + 2  # none lost, none twice
    (event,) = received[(late.trace_id, late.span_id)].events_named(sc.GEN_AI_EVALUATION_RESULT)
    assert event.attributes[sc.GEN_AI_EVALUATION_SCORE_VALUE] == 1.0
    assert judged_pairs(stub) == [(cases[0]["question"], cases[0]["answer"])]
    unscored = received[(lost.trace_id, lost.span_id)]
    assert not unscored.events_named(sc.GEN_AI_EVALUATION_RESULT)
    (reason,) = unscored.events_named(sc.TS_UNSCORED)
    assert reason.attributes[sc.TS_UNSCORED_REASON] == "no_llm_calls"
    assert _metric(gateway, "tracescore_gateway_llm_wait_total") == waited + 2
    assert _metric(gateway, "tracescore_gateway_llm_wait_expired_total") == expired + 1
    assert _metric(gateway, "tracescore_gateway_scoring_dropped_no_llm_calls") >= 1


@pytest.mark.parametrize("value", [-1, "soon", True])
def test_a_bad_llm_wait_is_refused_naming_the_key(value: Any) -> None:
    from tracescore._exceptions import ConfigurationError
    from tracescore.gateway._config import load_gateway_config

    with pytest.raises(ConfigurationError, match="trace.llm_wait_s"):
        load_gateway_config(overrides={"trace.llm_wait_s": value}, environ={})


@pytest.mark.parametrize("instrumentation", INSTRUMENTATIONS)
def test_rescore_reads_agent_spans_stored_before_their_llm_calls(
        instrumentation: str, venv: Path, model: StubLLMServer, gateway: GatewayProcess,
        receiver: OTLPReceiver, stub: StubLLMServer, tmp_path: Path) -> None:
    """`tracescore rescore` over a file where every span comes before the spans below it (one
    line each, parents first): each agent span is scored once its LLM calls have been read."""
    from click.testing import CliRunner

    from tracescore.cli import main

    cases, sent, _, judged = gateway_run(instrumentation, venv, model, gateway, receiver, stub)
    traces = tmp_path / "traces.jsonl"
    lines = [json.dumps(_request([span])) for span in
             sorted(sent, key=lambda s: (s.start_time_unix_nano, s.end_time_unix_nano))]
    traces.write_text("\n".join(lines) + "\n", encoding="utf-8")
    config = tmp_path / "rescore.yaml"
    config.write_text("scoring:\n  isolation: thread\n  scorers:\n"
                      f"    - {{scorer: relevancy, options: {relevancy_options(stub)}}}\n"
                      "trace:\n  llm_wait_s: 30\n", encoding="utf-8")
    out = tmp_path / "rescored.jsonl"
    stub.clear()
    result = CliRunner().invoke(main, ["rescore", str(traces), "-c", str(config), "-o", str(out)])
    assert result.exit_code == 0, result.output
    spans = [s for line in out.read_text().splitlines() if line.strip()
             for s in spans_from_otlp_json(line)]
    agents = {s.span_id for s in sent if is_agent_span(s)}
    assert agents <= {s.span_id for s in spans}  # and the root AGENT spans that only contain them
    for span in spans:
        events = span.events_named(sc.GEN_AI_EVALUATION_RESULT)
        assert len(events) == (span.span_id in agents), span.name
        for event in events:
            assert event.attributes[sc.GEN_AI_EVALUATION_SCORE_VALUE] == 1.0
    assert sorted(judged_pairs(stub)) == sorted(judged) == sorted(
        expected_pairs(instrumentation, cases))


def test_a_waiting_agent_span_goes_on_unscored_at_shutdown(
        venv: Path, model: StubLLMServer, gateway: GatewayProcess, receiver: OTLPReceiver,
        stub: StubLLMServer) -> None:
    """Stopping while an agent span waits for its LLM calls: it is forwarded at once, unscored
    with reason `shutdown`, not held for the rest of its wait."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from tracescore.gateway._engine import Engine
    from tracescore.gateway._metrics import GatewayMetrics
    from tracescore.gateway._rescore_input import parse_line

    _, sent, _, _ = gateway_run("openinference", venv, model, gateway, receiver, stub)
    agent = next(s for s in sent if s.attributes.get(sc.OI_AGENT_NAME) == "geo")
    out: list[bytes] = []

    class Output:
        def put(self, ids: tuple[int, ...], body: bytes, count: int) -> None:
            out.append(body)

    engine = Engine(scorers=[tracescore.create_content_similarity_scorer()],
                    recognisers=tracescore.build_recognisers(), output=Output(),
                    metrics=GatewayMetrics(), processor_options={"isolation": "thread"},
                    trace_options={"llm_wait_s": 60})
    _, request = parse_line(json.dumps(_request([agent])).encode(), "agent")
    engine.accept(request)
    assert engine.held == 1 and not out
    engine.shutdown(5)
    (body,) = out
    (span,) = ExportTraceServiceRequest.FromString(body).resource_spans[0].scope_spans[0].spans
    assert span.span_id.hex() == agent.span_id
    (event,) = span.events
    assert event.name == sc.TS_UNSCORED
    assert {kv.key: kv.value.string_value for kv in event.attributes}[
        sc.TS_UNSCORED_REASON] == "shutdown"


@pytest.mark.parametrize("instrumentation", INSTRUMENTATIONS)
def test_inspect_reads_agent_spans_without_content_as_the_gateway_does(
        instrumentation: str, venv: Path, model: StubLLMServer, gateway: GatewayProcess,
        receiver: OTLPReceiver, stub: StubLLMServer, tmp_path: Path) -> None:
    """`tracescore inspect` on the stored spans: each agent span is reported as scored with the
    question and answer the gateway judged (read from its LLM calls); the OpenInference root
    that only contains it is not reported."""
    from click.testing import CliRunner

    from tracescore.cli import main

    _, sent, _, judged = gateway_run(instrumentation, venv, model, gateway, receiver, stub)
    traces = tmp_path / "traces.jsonl"
    traces.write_text("\n".join(json.dumps(_request([span])) for span in sent) + "\n",
                      encoding="utf-8")
    result = CliRunner().invoke(main, ["inspect", str(traces), "--json"])
    assert result.exit_code == 0, result.output
    reports = json.loads(result.output)["agent_spans"]
    assert sorted(r["span_id"] for r in reports) == sorted(
        s.span_id for s in sent if is_agent_span(s))
    assert all(r["scored"] for r in reports), reports
    assert sorted((r["question"], r["answer"]) for r in reports) == sorted(judged)
