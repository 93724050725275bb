"""Online scoring on a TracerProvider you build yourself: one ScoringSpanProcessor line.

Wrap your export processor in `ScoringSpanProcessor`; sampled agent spans are held until their
scores are attached as events, every other span passes straight through.

    OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318 python examples/own_tracer_provider.py
"""

from __future__ import annotations

import os

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

import tracescore

# Your own provider and exporter, as you already have them.
provider = TracerProvider(resource=Resource.create({"service.name": "own-provider-example"}))
exporter = OTLPSpanExporter() if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") \
    else ConsoleSpanExporter()
judge = os.environ.get("TRACESCORE_JUDGE_MODEL", "tracescore/offline")

# The one line: score agent calls before they are exported.
provider.add_span_processor(tracescore.ScoringSpanProcessor(
    BatchSpanProcessor(exporter),
    [tracescore.create_answer_relevancy_scorer(model=judge),
     tracescore.OnlineScorer(tracescore.create_content_similarity_scorer(), rate=0.5)],
))
trace.set_tracer_provider(provider)


@tracescore.agent(name="weather-agent")
def weather(question: str) -> str:
    return "It will be sunny in Lisbon tomorrow, around 24 degrees."


if __name__ == "__main__":
    print(weather("What is the weather in Lisbon tomorrow?"))
    provider.shutdown()  # waits (bounded) for pending scores, then exports everything
