"""Helpers for the gateway tests: spans sent the way real senders send them."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _helpers import SeenScorer
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter

from tracescore.gateway import Gateway, GatewayConfig
from tracescore.online import OnlineScorer

QUESTION = "What is the capital of France?"
ANSWER = "Paris is the capital of France."


def agent_attributes(question: str = QUESTION, answer: str = ANSWER, name: str = "geo"
                     ) -> dict[str, Any]:
    """A GenAI-semconv `invoke_agent` span's attributes, as OTel GenAI instrumentations set them."""
    return {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": name,
        "gen_ai.input.messages": json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": question}]}]),
        "gen_ai.output.messages": json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": answer}]}]),
    }


@contextmanager
def sender(exporter: SpanExporter, service: str = "app") -> Iterator[Any]:
    """A tracer whose spans go, one export per span, through `exporter` (shut down at the end)."""
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    try:
        yield provider.get_tracer("test.sender")
    finally:
        provider.shutdown()


def agent_trace(tracer: Any, *, plain_children: int = 1, **attributes: Any) -> None:
    """One trace: an agent span with `plain_children` non-agent child spans."""
    with tracer.start_as_current_span("invoke_agent geo", attributes=agent_attributes(**attributes)):
        for index in range(plain_children):
            with tracer.start_as_current_span(f"chat step-{index}",
                                              attributes={"gen_ai.operation.name": "chat"}):
                pass


def plain_request(spans: int, rng: random.Random | None = None) -> ExportTraceServiceRequest:
    """A request of `spans` non-agent spans (random ids), as a collector would forward them."""
    rng = rng or random.Random(0)
    request = ExportTraceServiceRequest()
    rs = request.resource_spans.add()
    rs.resource.attributes.add(key="service.name").value.string_value = "load"
    ss = rs.scope_spans.add()
    ss.scope.name = "load"
    for index in range(spans):
        span = ss.spans.add(name=f"GET /item/{index}", kind=2,
                            start_time_unix_nano=1_700_000_000_000_000_000 + index,
                            end_time_unix_nano=1_700_000_000_001_000_000 + index)
        span.trace_id = rng.randbytes(16)
        span.span_id = rng.randbytes(8)
        span.attributes.add(key="http.route").value.string_value = "/item/{id}"
        span.attributes.add(key="http.status_code").value.int_value = 200
    return request


@contextmanager
def seen_gateway(folder: Path, exporter_endpoint: str) -> Iterator[Gateway]:
    """An in-process gateway on free loopback ports, its journal in `folder`, scoring every
    agent call with `SeenScorer` (thread isolation) and forwarding to `exporter_endpoint`."""
    config = GatewayConfig(
        grpc_endpoint="127.0.0.1:0", http_endpoint="127.0.0.1:0", health_endpoint="127.0.0.1:0",
        exporter_endpoint=exporter_endpoint, journal_path=str(folder / "j.db"),
        journal_sync="normal", scorers=[OnlineScorer(SeenScorer())], isolation="thread",
        shutdown_timeout_s=10.0)
    gateway = Gateway(config).start()
    try:
        yield gateway
    finally:
        gateway.stop(timeout_s=5)
