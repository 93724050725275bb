"""GenAI content log records joined to their span (`LogContent`), for the family of ways
instrumentations log a call's messages: the event named in the record's `event_name` or in an
`event.name` attribute, the message in the body (a map or plain text) or in the attributes, per
message events or one `operation.details` event, OTLP records (the gateway) or SDK records (in
process). Generated cases: the judged question is the user's text, the answer the logged one;
records of other spans, without a span or of other events read nothing; the store is bounded."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry._logs import LogRecord as ApiLogRecord
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.sdk._logs import ReadWriteLogRecord
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from tracescore.online.intake import (
    GENAI,
    AgentReader,
    LogContent,
    RecognisedCall,
    attributes_of,
    unwrap_input,
    unwrap_output,
)

AGENT = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "geo"}
TRACE, SPAN = 0x5B8EFFF798038103D269B633813FC60C, 0xEEE19B7EC3C1B174
text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1,
               max_size=40).filter(lambda t: t.strip() and t[0] not in "[{\"")


def _set(value: AnyValue, python: Any) -> None:
    if isinstance(python, dict):
        for key, item in python.items():
            _set(value.kvlist_value.values.add(key=key).value, item)
    else:
        value.string_value = python


def _otlp(records: list[dict[str, Any]]) -> ExportLogsServiceRequest:
    """One request with `records`: {name, in ("event_name" | "attribute"), body, attributes,
    trace, span}."""
    request = ExportLogsServiceRequest()
    scope_logs = request.resource_logs.add().scope_logs.add()
    for spec in records:
        record = scope_logs.log_records.add()
        record.trace_id = spec.get("trace", TRACE).to_bytes(16, "big")
        record.span_id = spec.get("span", SPAN).to_bytes(8, "big")
        if spec["named"] == "event_name":
            record.event_name = spec["name"]
        else:
            record.attributes.add(key="event.name").value.string_value = spec["name"]
        for key, value in spec.get("attributes", {}).items():
            record.attributes.add(key=key).value.string_value = value
        if spec.get("body") is not None:
            _set(record.body, spec["body"])
    return request


@st.composite
def conversations(draw: Any) -> tuple[str, str, list[dict[str, Any]]]:
    """(question, answer, the records an instrumentation logs for them), in one of the ways."""
    question, answer, system = draw(text), draw(text), draw(text)
    named = draw(st.sampled_from(["event_name", "attribute"]))
    if draw(st.booleans()):  # one details event with the messages as JSON attributes
        inputs = [{"role": "system", "parts": [{"type": "text", "content": system}]},
                  {"role": "user", "parts": [{"type": "text", "content": question}]}]
        outputs = [{"role": "assistant", "parts": [{"type": "text", "content": answer}]}]
        return question, answer, [{"name": "gen_ai.client.inference.operation.details",
                                   "named": named, "attributes": {
                                       "gen_ai.input.messages": json.dumps(inputs),
                                       "gen_ai.output.messages": json.dumps(outputs)}}]
    where = draw(st.sampled_from(["body map", "body text", "attributes"]))

    def message(name: str, key: str, value: Any) -> dict[str, Any]:
        if where == "body map":
            return {"name": name, "named": named, "body": {key: value}}
        if where == "body text" and isinstance(value, str):
            return {"name": name, "named": named, "body": value}
        encoded = value if isinstance(value, str) else json.dumps(value)
        return {"name": name, "named": named, "attributes": {key: encoded}}

    records = [message("gen_ai.user.message", "content", question),
               message("gen_ai.choice", "message", {"role": "assistant", "content": answer})]
    if draw(st.booleans()):
        records.insert(0, message("gen_ai.system.message", "content", system))
    return question, answer, records


def _read(content: LogContent, trace: int = TRACE, span: int = SPAN) -> Any:
    events, decode = content.joined((trace, span), [], attributes_of)
    return AgentReader([GENAI]).read("invoke_agent geo", AGENT, events, decode)[0]


def _question_and_answer(call: RecognisedCall) -> tuple[str, str]:
    messages = call.input if isinstance(call.input, list) else json.loads(call.input)
    users = [m for m in messages if m["role"] == "user"]
    content = users[-1]["content"] if "content" in users[-1] else users[-1]["parts"]
    if isinstance(content, list):
        content = "".join(part.get("content", part.get("text", "")) for part in content)
    output = call.output
    if isinstance(output, str) and output.startswith("["):
        output = "".join(p.get("content", "") for m in json.loads(output) for p in m["parts"])
    return content, output


@settings(max_examples=60, deadline=None)
@given(conversations(), st.booleans())
def test_logged_content_is_read_as_the_spans_question_and_answer(
        case: tuple[str, str, list[dict[str, Any]]], with_noise: bool) -> None:
    question, answer, records = case
    if with_noise:  # records that are not this span's content
        records = [{"name": "gen_ai.user.message", "named": "event_name", "body": {"content": "x"},
                    "span": SPAN + 1},
                   {"name": "app.started", "named": "event_name", "body": {"content": "y"}},
                   *records]
    content = LogContent()
    added = content.add_otlp(_otlp(records))
    assert (TRACE, SPAN) in added
    call = _read(content)
    assert isinstance(call, RecognisedCall)
    assert _question_and_answer(call) == (question, answer)


@settings(max_examples=30, deadline=None)
@given(text, text, st.sampled_from(["event_name", "attribute"]))
def test_sdk_records_are_read_the_same_way(question: str, answer: str, named: str) -> None:
    content = LogContent()
    context = trace.set_span_in_context(NonRecordingSpan(SpanContext(
        TRACE, SPAN, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))))
    bodies: tuple[tuple[str, Any], ...] = (
        ("gen_ai.user.message", {"content": question}),
        ("gen_ai.choice", {"index": 0, "message": {"role": "assistant", "content": answer}}))
    for name, body in bodies:
        record = ApiLogRecord(context=context, body=body,
                              event_name=name if named == "event_name" else None,
                              attributes={"event.name": name} if named == "attribute" else {})
        assert content.add_sdk(ReadWriteLogRecord(record)) == (TRACE, SPAN)
    call = _read(content)
    assert isinstance(call, RecognisedCall)
    assert _question_and_answer(call) == (question, answer)


def test_records_without_a_span_or_of_other_events_are_not_kept() -> None:
    content = LogContent()
    request = _otlp([{"name": "gen_ai.user.message", "named": "event_name",
                      "body": {"content": "q"}, "span": 0},
                     {"name": "gen_ai.evaluation.result", "named": "event_name", "body": "r"},
                     {"name": "", "named": "event_name", "body": "a log line"}])
    assert content.add_otlp(request) == set()
    assert len(content) == 0
    assert content.add_otlp(request, request.SerializeToString()) == set()


def test_the_store_is_bounded_in_spans_bytes_and_age() -> None:
    content = LogContent(max_spans=3, max_bytes=10_000, max_age_s=300)
    for span in range(1, 6):
        content.add(TRACE, span, "gen_ai.user.message", {"content": f"q{span}"})
    assert len(content) == 3 and content.dropped == 2
    assert content.events(TRACE, 1) == [] and content.events(TRACE, 5)
    content.add(TRACE, 9, "gen_ai.user.message", {"content": "x" * 20_000})  # over the bytes
    assert content.events(TRACE, 9) == []
    content.add(TRACE, 10, "gen_ai.user.message", {"content": "y" * 9_000})
    assert content.bytes <= 10_000 and content.events(TRACE, 10)
    aged = LogContent(max_age_s=0.0)
    aged.add(TRACE, 1, "gen_ai.user.message", {"content": "q"})
    aged.add(TRACE, 2, "gen_ai.user.message", {"content": "q"})
    assert aged.events(TRACE, 1) == []


def test_a_choice_logged_as_content_in_gemini_parts_is_the_answer() -> None:
    """Google ADK's shape: `gen_ai.choice` with `content` (a Gemini message with parts), and
    user messages as Gemini messages."""
    content = LogContent()
    content.add(TRACE, SPAN, "gen_ai.user.message",
                {"content": {"role": "user", "parts": [{"text": "What is the capital of Peru?"}]}})
    content.add(TRACE, SPAN, "gen_ai.choice", {"index": 0, "finish_reason": "STOP", "content": {
        "role": "model", "parts": [{"text": "Lima."}]}})
    call = _read(content)
    assert isinstance(call, RecognisedCall)
    assert unwrap_output(call.output) == "Lima."
    assert "What is the capital of Peru?" in json.dumps(unwrap_input(call.input))


@given(st.sampled_from(["gen_ai.user.message", "gen_ai.choice", "gen_ai.system.message"]),
       st.sampled_from(["content", "message"]), st.sampled_from(["<elided>", " <elided> "]))
def test_placeholders_of_content_not_captured_are_not_content(name: str, key: str,
                                                              placeholder: str) -> None:
    """With content capture off, ADK logs `<elided>` where the text would be: never judged."""
    content = LogContent()
    assert not content.add(TRACE, SPAN, name, {key: placeholder})
    assert not content.add(TRACE, SPAN, name, {key: {"role": "user", "content": placeholder}})
    assert content.events(TRACE, SPAN) == []


def test_a_model_call_noted_without_content_is_read_when_its_records_come() -> None:
    content = LogContent(max_spans=2)
    chat = {"gen_ai.operation.name": "chat"}
    content.note_call((TRACE, 1), 7, 100, chat)  # no content record kept yet: not noted
    content.add(TRACE, 99, "gen_ai.user.message", {"content": "elsewhere"})
    for span in (1, 2, 3):  # the oldest goes past max_spans
        content.note_call((TRACE, span), 7, 100 + span, chat)
    messages = {"gen_ai.input.messages": json.dumps([{"role": "user", "content": "q?"}]),
                "gen_ai.output.messages": json.dumps([{"role": "assistant", "content": "a."}])}
    for span in (1, 2, 3):
        content.add(TRACE, span, "gen_ai.client.inference.operation.details", messages)
    found = content.logged_calls({(TRACE, 1), (TRACE, 2), (TRACE, 3), (TRACE, 4)})
    assert sorted((key, parent) for key, parent, _ in found) == [((TRACE, 2), 7), ((TRACE, 3), 7)]
    assert all(call.start_ns in (102, 103) for _, _, call in found)
    assert content.logged_calls({(TRACE, 2)}) == []  # read once
