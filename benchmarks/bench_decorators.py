"""Decorator overhead: `@tracescore.agent` against a hand-written OpenTelemetry span, side by side.

Per-call cost of a sync and an async function, measured interleaved in one run:
  * bare:       the undecorated function;
  * minimal:    `tracer.start_as_current_span(...)` around the call with 2 plain attributes
                (operation and agent name): the cheapest span a user could write by hand;
  * raw:        `tracer.start_as_current_span(...)` around the call, setting the same attributes
                as the decorator (operation, agent name, input/output messages as semconv JSON);
  * tracescore: the same function under `@tracescore.agent` (content capture and redaction on,
                the defaults);
  * tracescore+oi: the same with OpenInference `input.value` / `output.value` copies turned on
                (`set_content_capture(openinference=True)`, off by default).
Both traced variants export through the same TracerProvider + SimpleSpanProcessor into an
exporter that discards spans, so only instrumentation cost differs. The ratio columns are
tracescore/raw (same attributes; target <= 1.2) and tracescore/minimal (what capturing the
input and output adds over the cheapest span); the OpenInference column is tracescore+oi /
tracescore.

    python benchmarks/bench_decorators.py [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import environment, interleaved, print_table, write_json
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.trace import SpanKind

import tracescore
from tracescore import _config
from tracescore import _semconv as sc

QUESTION = "What is the capital of France, and how many people live there?"
ANSWER = "Paris is the capital of France; about 2.1 million people live in the city proper."


class _DiscardExporter(SpanExporter):
    """Accepts and drops every span (counts them, to prove both sides export)."""

    def __init__(self) -> None:
        self.count = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.count += len(spans)
        return SpanExportResult.SUCCESS


def _messages(role: str, text: str, finish: bool) -> str:
    message: dict[str, Any] = {"role": role, "parts": [{"type": "text", "content": text}]}
    if finish:
        message["finish_reason"] = "stop"
    return json.dumps([message], ensure_ascii=False, separators=(",", ":"))


def build_cases(tracer: trace.Tracer) -> dict[str, Callable[[], Any]]:
    def answer(question: str) -> str:
        return ANSWER

    async def aanswer(question: str) -> str:
        return ANSWER

    static = {sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT, sc.GEN_AI_AGENT_NAME: "bench"}

    def minimal(question: str) -> str:
        with tracer.start_as_current_span(
            "invoke_agent bench", kind=SpanKind.INTERNAL, attributes=static
        ):
            return answer(question)

    async def aminimal(question: str) -> str:
        with tracer.start_as_current_span(
            "invoke_agent bench", kind=SpanKind.INTERNAL, attributes=static
        ):
            return await aanswer(question)

    def raw(question: str) -> str:
        with tracer.start_as_current_span(
            "invoke_agent bench",
            kind=SpanKind.INTERNAL,
            attributes={**static, sc.GEN_AI_INPUT_MESSAGES: _messages("user", question, False)},
        ) as span:
            result = answer(question)
            span.set_attribute(sc.GEN_AI_OUTPUT_MESSAGES, _messages("assistant", result, True))
            return result

    async def araw(question: str) -> str:
        with tracer.start_as_current_span(
            "invoke_agent bench",
            kind=SpanKind.INTERNAL,
            attributes={**static, sc.GEN_AI_INPUT_MESSAGES: _messages("user", question, False)},
        ) as span:
            result = await aanswer(question)
            span.set_attribute(sc.GEN_AI_OUTPUT_MESSAGES, _messages("assistant", result, True))
            return result

    traced = tracescore.agent(name="bench")(answer)
    atraced = tracescore.agent(name="bench")(aanswer)
    # both tracescore variants pay the same settings switch (one global assignment per call)
    off = _config.set_content_capture(True, redact=True, openinference=False)
    on = dataclasses.replace(off, openinference=True)

    def under(settings: _config.ContentSettings, fn: Callable[[str], Any]) -> Callable[[], Any]:
        def run() -> Any:
            _config._settings = settings
            return fn(QUESTION)

        return run

    return {
        "sync bare": lambda: answer(QUESTION),
        "sync minimal": lambda: minimal(QUESTION),
        "sync raw": lambda: raw(QUESTION),
        "sync tracescore": under(off, traced),
        "sync tracescore+oi": under(on, traced),
        "async bare": lambda: aanswer(QUESTION),
        "async minimal": lambda: aminimal(QUESTION),
        "async raw": lambda: araw(QUESTION),
        "async tracescore": under(off, atraced),
        "async tracescore+oi": under(on, atraced),
    }


def _async_case(make: Callable[[], Any]) -> Callable[[], Any]:
    async def run() -> Any:
        return await make()

    return run


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds/calls (smoke run)")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--calls", type=int, default=None, help="calls per round and case")
    parser.add_argument("--json", dest="json_path", default=None, help="write figures here")
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                        help="cpu: this thread's CPU time (default; steady on a shared host, and "
                             "the export runs in this thread); wall: elapsed time")
    args = parser.parse_args(argv)
    # Many short rounds: the interleaving then spreads a busy host's noise evenly over the cases.
    rounds = args.rounds or (5 if args.quick else 21)
    calls = args.calls or (500 if args.quick else 3_000)

    exporter = _DiscardExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    tracer = provider.get_tracer("bench")
    tracescore.set_content_capture(True, redact=True)

    cases = build_cases(tracer)
    timed = {
        name: (_async_case(fn) if name.startswith("async") else fn) for name, fn in cases.items()
    }
    medians = interleaved(timed, rounds=rounds, n=calls, clock=args.clock)
    assert exporter.count > 0

    results: dict[str, Any] = {"environment": environment(), "rounds": rounds, "calls": calls,
                               "clock": args.clock}
    rows = []
    for flavour in ("sync", "async"):
        bare, minimal, raw, ours, oi = (
            medians[f"{flavour} {k}"]
            for k in ("bare", "minimal", "raw", "tracescore", "tracescore+oi")
        )
        ratio = ours / raw
        results[flavour] = {
            "bare_ns": bare,
            "minimal_ns": minimal,
            "raw_ns": raw,
            "tracescore_ns": ours,
            "tracescore_openinference_ns": oi,
            "raw_overhead_ns": raw - bare,
            "tracescore_overhead_ns": ours - bare,
            "ratio_tracescore_over_raw": ratio,
            "ratio_tracescore_over_minimal": ours / minimal,
            "ratio_raw_over_minimal": raw / minimal,
            "ratio_openinference_over_off": oi / ours,
        }
        rows.append([flavour, bare, minimal, raw, ours, ratio, ours / minimal, oi, oi / ours])
    print_table(
        rows,
        ["function", "bare ns/call", "minimal span ns/call", "same-attr span ns/call",
         "tracescore ns/call", "ts/same-attr", "ts/minimal", "+openinference ns/call",
         "oi/off"],
        title=f"Decorator overhead (median of {rounds} interleaved rounds x {calls} calls, "
              f"{args.clock} time)",
    )
    for flavour in ("sync", "async"):
        verdict = "OK" if results[flavour]["ratio_tracescore_over_raw"] <= 1.2 else "ABOVE TARGET"
        print(
            f"{flavour}: tracescore/same-attribute span = "
            f"{results[flavour]['ratio_tracescore_over_raw']:.3f} (target <= 1.2) {verdict}; "
            f"tracescore/minimal span = {results[flavour]['ratio_tracescore_over_minimal']:.3f}"
        )
    write_json(args.json_path, results)
    return results


if __name__ == "__main__":
    main()
