"""Export cost: tracescore's export pipeline against the plain SDK BatchSpanProcessor + OTLP exporter,
side by side in one run.

Two figures, each measured interleaved (median of the rounds):

  * export thread, per batch of 512 typical agent spans (1 KB input/output each, two events):
      sdk:        `encode_spans(batch).SerializeToString()`, what the SDK's OTLP exporter does
                  with a batch before it reaches the network;
      tracescore: the span cap and request split (`GuardedExporter`), then the same encoding of
                  each request. Ratio tracescore / sdk: the cost of the cap and split.
    The same with one 20 MB span in the batch: the SDK encodes (and sends) all of it, which a
    collector's 4 MiB gRPC limit then rejects together with the healthy spans; tracescore cuts it.
  * agent thread, per span ended, exporting over OTLP/HTTP to a loopback receiver:
      sdk batch / tracescore batch=True (both queue the span; the network is off the thread);
      sdk SimpleSpanProcessor / tracescore batch=False (the SDK exports on the agent's thread,
      tracescore from a background thread).

    python benchmarks/bench_export.py [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import environment, interleaved, print_table, write_json
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)

import tracescore
from tracescore import _semconv as sc
from tracescore._export_pipeline import ExportLimits, GuardedExporter
from tracescore.testing import OTLPReceiver

_TEXT = ("Paris is the capital of France; about 2.1 million people live in the city proper. " * 13)[:1024]


def _agent_span(tracer: Any, i: int, huge: bool = False) -> None:
    with tracer.start_as_current_span(f"invoke_agent geo-{i % 4}", attributes={
            sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT, sc.GEN_AI_AGENT_NAME: "geo",
            sc.GEN_AI_INPUT_MESSAGES: _TEXT, sc.GEN_AI_OUTPUT_MESSAGES: _TEXT}) as span:
        span.add_event("cache.miss", {"key": "capital"})
        span.add_event("retry", {"attempt": 1, "reason": "timeout"})
        if huge:
            span.set_attribute("dump", "x" * (20 << 20))


class _Collect(SpanExporter):
    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Any) -> SpanExportResult:
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS


class _Encode(SpanExporter):
    """What an OTLP exporter does with a batch before the network: encode and serialize it."""

    def export(self, spans: Any) -> SpanExportResult:
        encode_spans(spans).SerializeToString()
        return SpanExportResult.SUCCESS


def _batch(huge: bool) -> list[ReadableSpan]:
    collect = _Collect()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(collect))
    tracer = provider.get_tracer("bench-export")
    for i in range(512):
        _agent_span(tracer, i, huge=huge and i == 256)
    return collect.spans


def _export_thread(rounds: int, n: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    guard = GuardedExporter(_Encode(), ExportLimits())
    plain = _Encode()
    for label, huge in (("typical", False), ("one 20 MB span", True)):
        batch = _batch(huge)
        medians = interleaved({"sdk": partial(plain.export, batch),
                               "tracescore": partial(guard.export, batch)},
                              rounds=rounds, n=1 if huge else n, warmup=1)
        results[label] = {"sdk_ms": medians["sdk"] / 1e6, "tracescore_ms": medians["tracescore"] / 1e6,
                          "ratio": medians["tracescore"] / medians["sdk"]}
    return results


def _agent_thread(rounds: int, n: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    with OTLPReceiver(grpc=False) as receiver:
        def sdk(processor: Callable[[SpanExporter], SpanProcessor]) -> TracerProvider:
            provider = TracerProvider()
            provider.add_span_processor(processor(OTLPSpanExporter(endpoint=receiver.traces_url)))
            return provider

        handles: list[Any] = []

        def ours(batch: bool) -> TracerProvider:
            provider = TracerProvider()
            handles.append(tracescore.configure(
                exporter="otlp-http", endpoint=receiver.http_endpoint, batch=batch,
                tracer_provider=provider, flush_on_sigterm=False))
            return provider

        pairs = {
            "batch": (sdk(BatchSpanProcessor), ours(True)),
            "no batch": (sdk(SimpleSpanProcessor), ours(False)),
        }
        for label, (plain, mine) in pairs.items():
            plain_tracer, my_tracer = plain.get_tracer("bench"), mine.get_tracer("bench")
            medians = interleaved({"sdk": partial(_agent_span, plain_tracer, 0),
                                   "tracescore": partial(_agent_span, my_tracer, 0)},
                                  rounds=rounds, n=n)
            results[label] = {"sdk_us": medians["sdk"] / 1e3, "tracescore_us": medians["tracescore"] / 1e3,
                              "ratio": medians["tracescore"] / medians["sdk"]}
            plain.force_flush(30_000)
            plain.shutdown()
            receiver.clear()
        for handle in handles:
            handle.shutdown(30)
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds/calls (smoke run)")
    parser.add_argument("--json", default=None, help="write the figures to this JSON file")
    args = parser.parse_args(argv)
    rounds = 5 if args.quick else 15
    export = _export_thread(rounds, 3 if args.quick else 10)
    agent = _agent_thread(rounds, 200 if args.quick else 1000)
    write_json(args.json, {"environment": environment(), "rounds": rounds,
                           "export_thread": export, "agent_thread": agent})
    print_table([(k, v["sdk_ms"], v["tracescore_ms"], v["ratio"]) for k, v in export.items()],
                ["batch of 512 spans", "sdk ms", "tracescore ms", "ratio"],
                title=f"Export thread: encode vs cap+split+encode (median of {rounds} rounds)")
    print_table([(k, v["sdk_us"], v["tracescore_us"], v["ratio"]) for k, v in agent.items()],
                ["pipeline", "sdk us/span", "tracescore us/span", "ratio"],
                title=f"Agent thread: cost per span ended, OTLP/HTTP to loopback (median of {rounds} rounds)")


if __name__ == "__main__":
    main()
