"""configure() end to end: real OTLP exporters (HTTP protobuf and gRPC) into a real loopback receiver."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest
from _helpers import geo_agent, litellm_instrumented, shut_down_pipelines
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

import tracescore
from tracescore import _semconv as sc
from tracescore import _setup
from tracescore.testing import OTLPReceiver, spans_from_otlp_json

PROTOCOLS = ["http", "grpc"]


@pytest.fixture(autouse=True)
def _clean_pipelines(span_exporter) -> Iterator[None]:
    shut_down_pipelines()
    yield
    shut_down_pipelines()


def _endpoint(receiver: OTLPReceiver, protocol: str) -> str:
    return receiver.http_endpoint if protocol == "http" else receiver.grpc_endpoint


def _agent_run(question: str) -> str:
    """A small traced agent: an agent span with a tool child and a failing tool child."""
    tracer = trace.get_tracer("tracescore-test")
    with tracer.start_as_current_span(f"{sc.OP_INVOKE_AGENT} helper", attributes={
            sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT, sc.GEN_AI_AGENT_NAME: "helper"}) as agent:
        with tracer.start_as_current_span(f"{sc.OP_EXECUTE_TOOL} search", attributes={
                sc.GEN_AI_TOOL_NAME: "search"}) as tool:
            tool.add_event("cache.miss", {"key": question})
        with tracer.start_as_current_span(f"{sc.OP_EXECUTE_TOOL} broken", kind=SpanKind.CLIENT,
                                          record_exception=False, set_status_on_exception=False) as bad:
            bad.set_attribute(sc.ERROR_TYPE, "ValueError")
            bad.set_status(Status(StatusCode.ERROR, "no luck"))
        agent.set_attribute(sc.GEN_AI_OUTPUT_MESSAGES, "Paris")
    return "Paris"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_spans_reach_the_receiver(otlp_receiver: OTLPReceiver, protocol: str) -> None:
    handle = tracescore.configure(exporter=f"otlp-{protocol}", endpoint=_endpoint(otlp_receiver, protocol),
                                  headers={"X-Tenant": "acme"}, compression="gzip")
    assert _agent_run("capital of France?") == "Paris"
    assert handle.flush(10)
    spans = otlp_receiver.wait_for_spans(3)
    assert {s.protocol for s in spans} == {protocol}
    by_name = {s.name: s for s in spans}
    agent = by_name["invoke_agent helper"]
    search, broken = by_name["execute_tool search"], by_name["execute_tool broken"]
    assert agent.parent_span_id is None
    assert search.parent_span_id == agent.span_id and broken.parent_span_id == agent.span_id
    assert {s.trace_id for s in spans} == {agent.trace_id}
    assert agent.attributes[sc.GEN_AI_AGENT_NAME] == "helper"
    assert agent.attributes[sc.GEN_AI_OUTPUT_MESSAGES] == "Paris"
    assert [(e.name, e.attributes) for e in search.events] == [
        ("cache.miss", {"key": "capital of France?"})]
    assert (broken.status_code, broken.status_message, broken.kind) == ("ERROR", "no luck", "CLIENT")
    assert broken.attributes[sc.ERROR_TYPE] == "ValueError"
    assert agent.scope_name == "tracescore-test"
    (request,) = [r for r in otlp_receiver.requests if r.signal == "traces"]
    assert request.headers["x-tenant"] == "acme"
    if protocol == "http":  # gRPC negotiates compression below the metadata the receiver sees
        assert request.content_encoding == "gzip"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_configure_twice_exports_each_span_once(otlp_receiver: OTLPReceiver, protocol: str) -> None:
    endpoint = _endpoint(otlp_receiver, protocol)
    tracescore.configure(exporter=f"otlp-{protocol}", endpoint=endpoint)
    _agent_run("one")
    handle = tracescore.configure(exporter=f"otlp-{protocol}", endpoint=endpoint)
    _agent_run("two")
    assert handle.flush(10)
    otlp_receiver.wait_for_spans(6)
    assert handle.flush(1)
    names = sorted(s.name for s in otlp_receiver.spans)
    assert names == sorted(["invoke_agent helper", "execute_tool search", "execute_tool broken"] * 2)


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_standard_env_vars_are_honoured(otlp_receiver: OTLPReceiver, monkeypatch: pytest.MonkeyPatch,
                                        protocol: str) -> None:
    port_endpoint = (otlp_receiver.http_endpoint if protocol == "http/protobuf"
                     else f"http://{otlp_receiver.grpc_endpoint.split('://')[-1]}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", port_endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=from-env")
    handle = tracescore.configure(exporter="otlp")
    _agent_run("env")
    assert handle.flush(10)
    otlp_receiver.wait_for_spans(3)
    (request,) = otlp_receiver.requests
    assert request.headers["x-api-key"] == "from-env"
    assert request.protocol == ("http" if protocol == "http/protobuf" else "grpc")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_failing_backend_never_raises_into_the_app(otlp_receiver: OTLPReceiver, protocol: str) -> None:
    handle = tracescore.configure(exporter=f"otlp-{protocol}", endpoint=_endpoint(otlp_receiver, protocol),
                                  batch=False)
    otlp_receiver.fail_next(1, status=400)  # not retryable: the batch is dropped
    assert _agent_run("rejected") == "Paris"  # the first request (with the tool span) is rejected
    assert handle.flush(5) is False  # reports the rejected export, once
    assert handle.flush(5) is True
    assert otlp_receiver.requests[0].rejected_with == 400
    failed = handle.stats()["export.failed"]
    names = [s.name for s in otlp_receiver.spans]
    assert failed >= 1 and len(names) == 3 - failed and "execute_tool search" not in names


def test_unreachable_backend_never_raises_into_the_app() -> None:
    handle = tracescore.configure(exporter="otlp-http", endpoint="http://127.0.0.1:9")
    assert _agent_run("nobody listens") == "Paris"  # batched: export happens off the app's thread
    assert handle.flush(0.5) is False  # the export keeps retrying; flush reports it did not finish
    handle.shutdown(0.5)  # bounded, even though the backend never answers
    assert not handle.active


def test_file_export_reads_back_as_otlp_json(tmp_path) -> None:
    path = tmp_path / "spans.jsonl"
    handle = tracescore.configure(exporter="file", file_path=path)
    _agent_run("to file")
    handle.shutdown()
    spans = spans_from_otlp_json(path.read_text())
    by_name = {s.name: s for s in spans}
    assert set(by_name) == {"invoke_agent helper", "execute_tool search", "execute_tool broken"}
    assert by_name["execute_tool search"].parent_span_id == by_name["invoke_agent helper"].span_id
    assert by_name["execute_tool broken"].status_code == "ERROR"


_SUBPROCESS_APP = """
import tracescore
from opentelemetry import trace

tracescore.configure(service_name="checkout-bot", exporter="otlp-{protocol}", endpoint={endpoint!r},
                     resource_attributes={{"deployment.environment": "test"}})

@tracescore.agent(name="checkout")
def checkout(order: str) -> str:
    return "ok"

checkout("o-1")
print("done")  # no flush: interpreter exit must deliver the span
"""

_SUBPROCESS_OWN_PROVIDER = """
import tracescore
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

provider = TracerProvider(resource=Resource.create({{"service.name": "own-provider"}}))
handle = tracescore.configure(tracer_provider=provider, exporter="otlp-{protocol}", endpoint={endpoint!r})

@tracescore.agent(name="checkout")
def checkout(order: str) -> str:
    return "ok"

checkout("o-1")
handle.flush(10)
handle.shutdown()  # the exit-time shutdown that follows must be a quiet no-op
print("done")
"""


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_fresh_process_gets_service_resource_and_exit_flush(otlp_receiver: OTLPReceiver,
                                                            protocol: str) -> None:
    code = textwrap.dedent(_SUBPROCESS_APP).format(protocol=protocol,
                                                  endpoint=_endpoint(otlp_receiver, protocol))
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and "Exception" not in result.stderr, result.stderr
    assert result.stdout.strip() == "done"
    (span,) = otlp_receiver.wait_for_spans(1)
    assert span.name == "invoke_agent checkout"
    assert span.resource["service.name"] == "checkout-bot"
    assert span.resource["deployment.environment"] == "test"


def test_given_provider_becomes_global_when_none_is_set(otlp_receiver: OTLPReceiver) -> None:
    code = textwrap.dedent(_SUBPROCESS_OWN_PROVIDER).format(protocol="http",
                                                           endpoint=otlp_receiver.http_endpoint)
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and "Exception" not in result.stderr, result.stderr
    (span,) = otlp_receiver.wait_for_spans(1)
    assert (span.name, span.resource["service.name"]) == ("invoke_agent checkout", "own-provider")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_decorated_agent_with_litellm_end_to_end(otlp_receiver: OTLPReceiver, stub_llm, protocol: str
                                                 ) -> None:
    geo = geo_agent(stub_llm, model="gpt-4o-mini")
    stub_llm.enqueue("Paris.", usage={"prompt_tokens": 12, "completion_tokens": 2})
    handle = tracescore.configure(exporter=f"otlp-{protocol}", endpoint=_endpoint(otlp_receiver, protocol))
    with litellm_instrumented():
        assert geo("Capital?") == "Paris."
    assert handle.flush(10)
    spans = {s.name: s for s in otlp_receiver.wait_for_spans(3)}
    agent, tool, chat = spans["invoke_agent geo"], spans["execute_tool lookup"], spans["chat gpt-4o-mini"]
    assert tool.parent_span_id == agent.span_id and chat.parent_span_id == agent.span_id
    assert (chat.kind, agent.kind) == ("CLIENT", "INTERNAL")
    assert chat.attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] == 12
    assert chat.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 2
    assert chat.attributes[sc.GEN_AI_PROVIDER_NAME] == "openai"
    assert chat.attributes[sc.TS_COST_USD] > 0
    assert "Paris." in agent.attributes[sc.GEN_AI_OUTPUT_MESSAGES]


def test_online_scoring_through_configure(otlp_receiver: OTLPReceiver) -> None:
    @tracescore.agent(name="echo")
    def echo(text: str) -> str:
        return text.upper()

    handle = tracescore.configure(exporter="otlp-http", endpoint=otlp_receiver.http_endpoint,
                                  scorers=[tracescore.create_content_similarity_scorer()],
                                  online={"max_wait_s": 10})
    echo("hello world")
    assert handle.flush(15)
    (span,) = otlp_receiver.wait_for_spans(1)
    (event,) = span.events_named(sc.GEN_AI_EVALUATION_RESULT)
    assert event.attributes[sc.TS_SCORER_ID] == "content-similarity"
    assert event.attributes[sc.GEN_AI_EVALUATION_SCORE_VALUE] == 1.0


def test_bad_online_options_fail_at_configure() -> None:
    with pytest.raises(tracescore.ConfigurationError):
        tracescore.configure(exporter="none", scorers=[tracescore.create_content_similarity_scorer()],
                             online={"max_wait_s": -1})
    assert not _setup._handles


def test_signal_specific_env_endpoint_is_used_as_is(otlp_receiver: OTLPReceiver,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")  # the TRACES_ one wins
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", otlp_receiver.traces_url)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "gzip")
    handle = tracescore.configure(exporter="otlp-http")
    _agent_run("traces endpoint")
    assert handle.flush(10)
    otlp_receiver.wait_for_spans(3)
    assert otlp_receiver.requests[0].content_encoding == "gzip"
