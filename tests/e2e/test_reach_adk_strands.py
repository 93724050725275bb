"""Google ADK and Strands Agents, with their own OpenTelemetry tracing, come out scored through
`tracescore serve` with the right question and answer; every other span passes through unchanged.

The real libraries run in one cached side venv (`rigs/agents/reach_adk.py`) with a
scripted model that calls a tool and then answers, in conversations of several turns, with and
without a system prompt; they export to a real gateway process, which forwards to the project's
OTLP receiver and judges relevancy through litellm at the stub judge. The judge's requests show
what was judged: the user's last question (no system prompt, tool return or earlier turn) and the
agent's final answer.

Strands records its messages as span events by default (`gen_ai.user.message`, `gen_ai.choice`),
as a `gen_ai.client.inference.operation.details` event with the latest GenAI conventions, or as
attributes (`gen_ai_span_attributes_only`). ADK's `invoke_agent` span records no content at all:
its question and answer are on the model-call spans below it (`generate_content` by default,
`call_llm` in its legacy telemetry), read by the child-span rule of feat/reach-agents.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _reach import gateway_fixtures, judged_pairs
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context
from rigs.side_envs import adk_strands_venv
from test_reach_node import assert_scored

import tracescore
from tracescore import _semconv as sc
from tracescore.online.intake._event_content import with_event_content
from tracescore.online.intake._frameworks import LLM_CALLS
from tracescore.online.intake._recognise import AgentMapping, recognise
from tracescore.scoring._inputs import answer_text, question_text
from tracescore.testing import GatewayProcess, OTLPReceiver, ReceivedSpan, StubLLMServer
from tracescore.testing._decode import spans_from_otlp_json

# One venv for both: ADK caps the OpenTelemetry SDK at 1.44, which Strands accepts; the OTLP
# exporters are pinned to match it.
RUNNER = Path(__file__).resolve().parents[1] / "rigs" / "agents" / "reach_adk.py"
# run -> (framework, the environment a user sets for it)
RUNS: dict[str, tuple[str, dict[str, str]]] = {
    "strands": ("strands", {}),  # span events gen_ai.system/user/assistant/tool.message, choice
    "strands_latest": ("strands", {"OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental"}),
    "strands_attributes": ("strands", {
        "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental,gen_ai_span_attributes_only"}),
    "adk": ("adk", {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY"}),
    "adk_legacy": ("adk", {"ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN": "1"}),  # call_llm spans
    "adk_no_content": ("adk", {}),  # content capture off: ADK's default
    # content only in log records (`operation.details` of each `generate_content` span)
    "adk_logs": ("adk", {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "EVENT_ONLY",
                         "REACH_EXPORT_LOGS": "1"}),
    "adk_no_content_logs": ("adk", {"REACH_EXPORT_LOGS": "1"}),  # its logs, content elided
}
_OPTIONS = ("OTEL_SEMCONV_STABILITY_OPT_IN", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
            "ADK_")
AGENT_SPAN = "invoke_agent geo"
_QUESTIONS = ["Which river flows through {}?", "What is the capital of {}?",
              "How old is the oldest bridge in {}?", "Name one museum in {}."]
_PLACES = ["Vienna", "Kraków", "São Paulo", "Zürich", "Lyon", "Osaka", "Quito", "Tartu"]
_ANSWERS = ["The Danube.", "It is {}.", "About 800 years, in {}.", "The main museum of {}.",
            '{{"city": "{}"}}', '["{}"]']

def generated_cases(seed: int, count: int, sessions: int = 3) -> list[dict[str, Any]]:
    """Questions and answers (some answers JSON text) in `sessions` conversations of several
    turns, each with or without a system prompt; two calls in three call the tool first (its
    result a text the question must not contain)."""
    rng = random.Random(seed)
    systems = [f"SYSTEM-PROMPT {seed}-{n}: answer in one short sentence."
               if rng.random() < 0.7 else None for n in range(sessions)]
    cases: list[dict[str, Any]] = []
    for index in range(count):
        place = rng.choice(_PLACES)
        session = index % sessions if index < sessions else rng.randrange(sessions)
        case: dict[str, Any] = {"question": f"{index}. " + rng.choice(_QUESTIONS).format(place),
                                "answer": rng.choice(_ANSWERS).format(place),
                                "session": f"session-{session}", "system": systems[session]}
        if index % 3 != 2:
            case["tool"] = {"argument": place, "result": f"TOOL-RESULT {index} about {place}"}
        cases.append(case)
    return cases


def recorded_answer(framework: str, case: dict[str, Any]) -> str:
    """The answer as the framework records it: Strands writes the agent's result as text, which
    ends with a newline."""
    return str(case["answer"]) + ("\n" if framework == "strands" else "")


@pytest.fixture(scope="module")
def side_python() -> Path:
    return adk_strands_venv() / "bin" / "python"


receiver, stub, gateway = gateway_fixtures()


def run_through_gateway(run: str, cases: list[dict[str, Any]], protocol: str,
                        side_python: Path, gateway: GatewayProcess, receiver: OTLPReceiver,
                        stub: StubLLMServer) -> tuple[list[ReceivedSpan], list[ReceivedSpan]]:
    """Run the cases through the real library, exporting to the gateway; (sent, received)."""
    framework, options = RUNS[run]
    receiver.clear()
    stub.clear()
    port = gateway.grpc_port if protocol == "grpc" else gateway.http_port
    env = {k: v for k, v in os.environ.items() if not k.startswith(_OPTIONS)}
    with tempfile.TemporaryDirectory(prefix="tracescore-reach-") as tmp:
        cases_file, tee = Path(tmp) / "cases.json", Path(tmp) / "sent.jsonl"
        cases_file.write_text(json.dumps(cases), encoding="utf-8")
        done = subprocess.run(
            [str(side_python), str(RUNNER), framework, str(cases_file),
             f"{protocol}://127.0.0.1:{port}", str(tee)],
            env={**env, **options}, capture_output=True, text=True, timeout=300, cwd=tmp,
            check=False)
        assert done.returncode == 0, done.stderr[-4000:]
        sent = [s for line in tee.read_text().splitlines() for s in spans_from_otlp_json(line)]
    received = receiver.wait_for_spans(len(sent), timeout=120)
    return sent, received


def _recorded(span: ReceivedSpan) -> str:
    """Everything a span recorded, as text (attributes and events)."""
    values = [*span.attributes.values(), *(v for e in span.events for v in e.attributes.values())]
    return json.dumps(values, ensure_ascii=False)


def assert_conversations(sent: list[ReceivedSpan], cases: list[dict[str, Any]]) -> None:
    """The calls really were conversations: a model call of a later turn saw the session's first
    question (and its system prompt) along with its own; the tool ran."""
    assert any(s.name == "execute_tool lookup" for s in sent)
    sessions: dict[str, list[dict[str, Any]]] = {}
    for case in cases:
        sessions.setdefault(case["session"], []).append(case)
    later = [turns for turns in sessions.values() if len(turns) > 1]
    assert later
    for turns in later:
        first, last = turns[0], turns[-1]
        needed = [first["question"], last["question"]] + [first["system"]] * bool(first["system"])
        assert any(all(json.dumps(n, ensure_ascii=False)[1:-1] in _recorded(s) for n in needed)
                   for s in sent), needed


# --- Strands Agents ------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize(("run", "protocol"), [
    ("strands", "http"), ("strands_latest", "grpc"), ("strands_attributes", "http")])
def test_strands_agent_calls_are_scored(run: str, protocol: str, side_python: Path,
                                        gateway: GatewayProcess, receiver: OTLPReceiver,
                                        stub: StubLLMServer) -> None:
    """Strands' content as span events (both conventions) or attributes: each `invoke_agent`
    span is scored on the turn's question and the agent's final answer."""
    cases = generated_cases(seed=len(run), count=7)
    sent, received = run_through_gateway(run, cases, protocol, side_python, gateway, receiver,
                                         stub)
    assert_conversations(sent, cases)
    assert_scored(sent, received, {AGENT_SPAN}, stub,
                  [(c["question"], recorded_answer("strands", c)) for c in cases])


@pytest.mark.slow
def test_strands_spans_are_scored_the_same_in_process(
        side_python: Path, gateway: GatewayProcess, receiver: OTLPReceiver,
        stub: StubLLMServer) -> None:
    """The same real spans (events included) replayed through an SDK pipeline: the processor
    judges the same questions and answers as the gateway did."""
    cases = generated_cases(seed=21, count=5)
    sent, _ = run_through_gateway("strands", cases, "http", side_python, gateway, receiver, stub)
    through_gateway = sorted(judged_pairs(stub))
    stub.clear()
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    scorer = tracescore.AnswerRelevancyScorer(model="openai/judge-stub", api_base=stub.base_url,
                                              api_key="sk-test", timeout=30)
    provider.add_span_processor(tracescore.ScoringSpanProcessor(
        SimpleSpanProcessor(exporter), [scorer], recognise=tracescore.build_recognisers(),
        isolation="thread"))
    sampled = SpanContext(trace_id=0xFFFF_FFFF_FFFF_FFFF_FFFF_FFFF_FFFF_FFFF, span_id=1,
                          is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    parent = set_span_in_context(NonRecordingSpan(sampled))
    for recorded in sent:
        span = provider.get_tracer(recorded.scope_name).start_span(
            recorded.name, context=parent, attributes=recorded.attributes)
        for event in recorded.events:
            span.add_event(event.name, event.attributes)
        span.end()
    assert provider.force_flush(30_000)
    provider.shutdown()
    scored = [s for s in exporter.get_finished_spans()
              if any(e.name == sc.GEN_AI_EVALUATION_RESULT for e in s.events)]
    assert [s.name for s in scored] == [AGENT_SPAN] * len(cases)
    assert sorted(judged_pairs(stub)) == through_gateway == sorted(
        (c["question"], recorded_answer("strands", c)) for c in cases)


# --- Google ADK ---------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize(("run", "protocol"), [
    ("adk", "grpc"), ("adk_legacy", "http")])
def test_adk_agent_calls_are_scored(run: str, protocol: str, side_python: Path,
                                    gateway: GatewayProcess, receiver: OTLPReceiver,
                                    stub: StubLLMServer) -> None:
    """ADK sessions of several turns: each `invoke_agent` span is scored on the turn's question
    (the first model call's last user text) and the final answer (the last model call's text)."""
    cases = generated_cases(seed=len(run) + 10, count=7)
    sent, received = run_through_gateway(run, cases, protocol, side_python, gateway, receiver,
                                         stub)
    assert_conversations(sent, cases)
    assert_scored(sent, received, {AGENT_SPAN}, stub,
                  [(c["question"], recorded_answer("adk", c)) for c in cases])


@pytest.mark.slow
def test_adk_with_content_only_in_logs_is_scored(side_python: Path, gateway: GatewayProcess,
                                                 receiver: OTLPReceiver,
                                                 stub: StubLLMServer) -> None:
    """ADK with `EVENT_ONLY`, its log records exported to the gateway as well: no span records
    content; each model call's messages are a log record of its `generate_content` span. Each
    `invoke_agent` span is scored on the turn's question and final answer, read from them."""
    cases = generated_cases(seed=43, count=6)
    sent, received = run_through_gateway("adk_logs", cases, "grpc", side_python, gateway,
                                         receiver, stub)
    assert not any(sc.GEN_AI_INPUT_MESSAGES in s.attributes for s in sent)  # all in the logs
    assert receiver.wait_for_logs(
        lambda r: r.event_name == "gen_ai.client.inference.operation.details", timeout=30)
    assert_scored(sent, received, {AGENT_SPAN}, stub,
                  [(c["question"], recorded_answer("adk", c)) for c in cases])


@pytest.mark.slow
def test_adk_logs_without_content_capture_are_never_judged(
        side_python: Path, gateway: GatewayProcess, receiver: OTLPReceiver,
        stub: StubLLMServer) -> None:
    """ADK as installed, its log records exported too: its `operation.details` records carry
    no messages, nothing is judged, and the agent spans go on unscored. (Its older event path
    logs `<elided>` in place of content, never judged either: tests/intake/test_log_content.py.)"""
    cases = generated_cases(seed=47, count=3)
    sent, received = run_through_gateway("adk_no_content_logs", cases, "grpc", side_python,
                                         gateway, receiver, stub)
    assert not any(sc.GEN_AI_INPUT_MESSAGES in s.attributes for s in sent)
    assert receiver.wait_for_logs(1, timeout=30)  # it did log (forwarded as they came)
    assert sum(s.name == AGENT_SPAN for s in received) == len(cases)
    time.sleep(3)  # past trace.llm_wait_s: a span read late would be judged by now
    assert [s for s in receiver.spans if s.events_named(sc.GEN_AI_EVALUATION_RESULT)] == []
    assert not any("elided" in json.dumps(r.json) for r in stub.requests)


@pytest.mark.slow
def test_adk_without_content_capture_is_unscored_and_the_log_names_the_switch(
        side_python: Path, gateway: GatewayProcess, receiver: OTLPReceiver,
        stub: StubLLMServer) -> None:
    """ADK as installed (no content switch set): its agent spans go on unscored, counted as
    unreadable, and the one warning names the variable that turns content on."""
    cases = generated_cases(seed=41, count=3)
    sent, received = run_through_gateway("adk_no_content", cases, "grpc", side_python, gateway,
                                         receiver, stub)
    assert not any(sc.GEN_AI_INPUT_MESSAGES in s.attributes for s in sent)  # none recorded
    assert [s for s in received if s.events_named(sc.GEN_AI_EVALUATION_RESULT)] == []
    assert sum(s.name == AGENT_SPAN for s in received) == len(cases)  # every span goes on
    deadline = time.monotonic() + 60  # after the wait for content-bearing model calls
    while time.monotonic() < deadline and not [
            e for e in gateway.logs if "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
            in e.get("message", "") and "(genai)" in e.get("message", "")]:
        time.sleep(0.2)
    warnings = [e["message"] for e in gateway.logs if "(genai)" in e.get("message", "")]
    assert any("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT" in w for w in warnings), (
        warnings)


@pytest.mark.slow
def test_adk_legacy_model_calls_are_read_by_the_adk_llm_call_mapping(
        side_python: Path, gateway: GatewayProcess, receiver: OTLPReceiver,
        stub: StubLLMServer) -> None:
    """What the child-span rule reads of ADK's legacy `call_llm` spans (`LLM_CALLS["adk"]`):
    the first call of a turn gives its question (the system prompt and earlier turns before it,
    no tool return), the last its final answer; tool spans and the agent span are no model
    calls. Only agent spans are scored (never a model call on its own)."""
    cases = generated_cases(seed=31, count=6)
    sent, received = run_through_gateway("adk_legacy", cases, "grpc", side_python, gateway,
                                         receiver, stub)
    assert {s.name for s in received if s.events_named(sc.GEN_AI_EVALUATION_RESULT)} == {
        AGENT_SPAN}
    mappings = [AgentMapping(**spec) for spec in LLM_CALLS["adk"]]
    by_parent: dict[str, list[tracescore.RecognisedCall]] = {}
    for span in sent:
        calls = [c for m in mappings if (c := m(span.name, span.attributes)) is not None]
        assert len(calls) == (span.name == "call_llm"), span.name
        by_parent.setdefault(span.parent_span_id or "", []).extend(calls)
    agents = sorted((s for s in sent if s.name == AGENT_SPAN), key=lambda s: s.start_time_unix_nano)
    assert len(agents) == len(cases)
    for agent, case in zip(agents, cases, strict=True):
        calls = by_parent[agent.span_id]
        assert len(calls) == 1 + ("tool" in case)
        first, last = calls[0], calls[-1]
        assert question_text(first.input) == case["question"]
        assert first.input[-1] == {"role": "user", "content": case["question"]}
        assert all(case["tool"]["result"] not in m["content"] for m in first.input
                   if "tool" in case)
        if case["system"]:
            assert first.input[0]["role"] == "system"
            assert first.input[0]["content"].startswith(case["system"])
        assert answer_text(last.output) == case["answer"]


# --- span events, generated -----------------------------------------------------------------------
_TEXTS = ["Paris", "é 日本 🙂", '{"capital": "Paris"}', '["a", "b"]', "", "line\nbreak", "  ",
          "null", '{"role": "x"}']


def _generated_conversations(seed: int, count: int) -> Iterator[dict[str, Any]]:
    rng = random.Random(seed)
    for index in range(count):
        turns = [(f"earlier {index}-{n}? " + rng.choice(_TEXTS), rng.choice(_TEXTS) or "ok")
                 for n in range(rng.randint(0, 2))]
        yield {"system": rng.choice([None, f"SYSTEM {index}"]), "turns": turns,
               "question": f"question {index}: " + rng.choice(_TEXTS),
               "tool": rng.random() < 0.5, "answer": rng.choice(_TEXTS) or "answer"}


def _legacy_events(conv: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Per-message events as Strands records them (content blocks as JSON, the answer as text)."""
    def blocks(*items: dict[str, Any]) -> dict[str, Any]:
        return {"content": json.dumps(list(items))}

    events = [("gen_ai.system.message", blocks({"text": conv["system"]}))] * bool(conv["system"])
    for question, answer in conv["turns"]:
        events += [("gen_ai.user.message", blocks({"text": question})),
                   ("gen_ai.assistant.message", blocks({"text": answer}))]
    events.append(("gen_ai.user.message", blocks({"text": conv["question"]})))
    if conv["tool"]:
        events += [("gen_ai.assistant.message", blocks({"toolUse": {"name": "t", "input": {}}})),
                   ("gen_ai.tool.message", blocks({"toolResult": {"content": [{"text": "R"}]}}))]
    return [*events, ("gen_ai.choice", {"message": conv["answer"], "finish_reason": "end_turn"})]


def _details_events(conv: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The latest conventions' operation details events (GenAI parts as JSON)."""
    def message(role: str, text: str) -> dict[str, Any]:
        return {"role": role, "parts": [{"type": "text", "content": text}]}

    inputs = [m for q, a in conv["turns"] for m in (message("user", q), message("assistant", a))]
    inputs.append(message("user", conv["question"]))
    if conv["tool"]:
        inputs.append({"role": "user", "parts": [{"type": "tool_call_response", "id": "1",
                                                  "response": [{"text": "R"}]}]})
    details = "gen_ai.client.inference.operation.details"
    return [(details, {sc.GEN_AI_INPUT_MESSAGES: json.dumps(inputs)}),
            (details, {sc.GEN_AI_OUTPUT_MESSAGES: json.dumps([message("assistant", conv["answer"])])})]


@pytest.mark.parametrize("events", [_legacy_events, _details_events])
def test_agent_spans_with_content_in_events_are_recognised(events: Any) -> None:
    """Whichever events carry the messages: the question is the last user text, the earlier turns
    (and the system prompt) stay before it, the answer is the final text, even when it is JSON."""
    for conv in _generated_conversations(seed=5, count=40):
        attributes = {sc.GEN_AI_OPERATION_NAME: "invoke_agent", sc.GEN_AI_AGENT_NAME: "geo"}
        assert recognise("invoke_agent geo", attributes) is None  # no content of its own
        call = recognise("invoke_agent geo", with_event_content(attributes, events(conv)))
        assert call is not None and call.convention == "genai"
        assert call.input[-1] == {"role": "user", "content": conv["question"]}
        assert question_text(call.input) == conv["question"]
        assert [m["content"] for m in call.input if m["role"] == "user"][:-1] == [
            q for q, _ in conv["turns"]]
        assert all(m["role"] != "tool" and "R" != m["content"] for m in call.input)
        assert call.output == conv["answer"]


def test_the_spans_own_attributes_win_over_its_events() -> None:
    own = {sc.GEN_AI_OPERATION_NAME: "invoke_agent",
           sc.GEN_AI_INPUT_MESSAGES: json.dumps([{"role": "user", "content": "own question"}])}
    conv = next(_generated_conversations(seed=1, count=1))
    merged = with_event_content(own, _legacy_events(conv))
    assert merged[sc.GEN_AI_INPUT_MESSAGES] == own[sc.GEN_AI_INPUT_MESSAGES]
    call = recognise("invoke_agent x", merged)
    assert call is not None and call.output == conv["answer"]
    plain = {sc.GEN_AI_OPERATION_NAME: "chat"}
    assert with_event_content(plain, [("exception", {"exception.message": "x"})]) is plain


def test_gemini_requests_and_responses_are_read_as_conversations() -> None:
    """Gemini's request (`contents`, `config.system_instruction`) and response (`content`), as
    ADK records them: function calls, function responses and thought parts are no text."""
    from tracescore.online.intake import _messages

    rng = random.Random(3)
    for index in range(30):
        turns = [[{"role": "user", "parts": [{"text": f"earlier {index}-{n}"}]},
                  {"role": "model", "parts": [{"text": rng.choice(_TEXTS) or "ok"}]}]
                 for n in range(rng.randint(0, 2))]
        question = f"question {index}: " + rng.choice(_TEXTS)
        contents = [m for turn in turns for m in turn] + [{"role": "user", "parts": [{"text": question}]}]
        if rng.random() < 0.5:
            contents += [{"role": "model", "parts": [{"thought": True, "text": "THOUGHT"},
                                                     {"function_call": {"name": "t", "args": {}}}]},
                         {"role": "user", "parts": [{"function_response": {
                             "name": "t", "response": {"result": "TOOL"}}}]}]
        system = rng.choice([None, f"SYSTEM {index}"])
        request = {"model": "m", "contents": contents,
                   "config": {"system_instruction": system} if system else {}}
        messages = _messages.as_input(json.dumps(request))
        assert isinstance(messages, list)
        assert messages[-1] == {"role": "user", "content": question}
        assert (messages[0] == {"role": "system", "content": system}) if system else (
            messages[0]["role"] == "user")
        assert not any(text in str(messages) for text in ("THOUGHT", "TOOL"))
        answer = rng.choice(_TEXTS) or "answer"
        response = {"content": {"role": "model", "parts": [{"thought": True, "text": "THOUGHT"},
                                                           {"text": answer}]}}
        assert _messages.holds_messages(response)
        assert _messages.final_text(json.dumps(response)) == answer
