"""Decorator overhead: `@tracescore.agent` against a hand-written OpenTelemetry span, side by side.

What users pay per call, measured interleaved in one run, for a sync and an async function:
process CPU time (every thread: export work moved to a background thread still counts; each
timed window ends with a flush so nothing owed is left out) and the calling thread's wall time.

Functions:
  * bare:        the undecorated function;
  * minimal:     `tracer.start_as_current_span(...)` with 2 plain attributes (operation and agent
                 name): the cheapest span a user could write by hand;
  * same-attr:   a hand-written span setting the same attributes as the decorator (operation,
                 agent name, input/output messages as semconv JSON): the baseline;
  * tracescore:  `@tracescore.agent` (content capture and redaction on, the defaults);
  * tracescore+oi: the same with OpenInference `input.value` / `output.value` copies
                 (`set_content_capture(openinference=True)`, off by default).
Span processors (each exporting into an exporter that discards spans): the SDK's
SimpleSpanProcessor and BatchSpanProcessor, and the two pipelines `tracescore.configure()`
builds (`batch=False`: each span exported as soon as it ends from a background thread;
`batch=True`: the SDK batch processor), both behind tracescore's span cap and request split.
The headline ratio is @agent / same-attr span under the same processor (target <= 1.0): for
configure()'s pipelines the same-attr span is exported through that same pipeline, so both pay
its guard. Each configure() case is also compared with the same-attr span under the SDK
processor a user would otherwise set up (Simple for batch=False, Batch for batch=True): that
ratio adds the pipeline's own cost (span cap, request split, counters) to the decorator's.

    python benchmarks/bench_decorators.py [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import environment, interleaved, print_table, write_json
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.trace import SpanKind

import tracescore
from tracescore import _config
from tracescore import _semconv as sc
from tracescore._export_pipeline import ExportLimits, GuardedExporter
from tracescore._setup import _pipeline

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


class _Switch(SpanProcessor):
    """The provider's one processor: forwards to the processor of the case being timed."""

    def __init__(self, processors: dict[str, SpanProcessor]) -> None:
        self.processors = processors
        self.current = next(iter(processors.values()))

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        self.current.on_start(span, parent_context=parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        self.current.on_end(span)

    def settle(self) -> None:
        """Flush every processor: background exports owed by the timed calls are counted."""
        for processor in self.processors.values():
            processor.force_flush()

    def shutdown(self) -> None:
        for processor in self.processors.values():
            processor.shutdown()


def _processors(exporter: SpanExporter) -> dict[str, SpanProcessor]:
    limits = ExportLimits.resolve(None, None)
    return {
        "simple": SimpleSpanProcessor(exporter),
        "batch": BatchSpanProcessor(exporter),
        "configure(batch=False)": _pipeline([GuardedExporter(exporter, limits)], batch=False),
        "configure(batch=True)": _pipeline([GuardedExporter(exporter, limits)], batch=True),
    }


def build_functions(tracer: trace.Tracer) -> dict[str, Callable[[str], Any]]:
    """name -> function of the question; async ones are coroutine functions."""
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

    return {"sync bare": answer, "sync minimal": minimal, "sync same-attr": raw,
            "sync tracescore": tracescore.agent(name="bench")(answer),
            "async bare": aanswer, "async minimal": aminimal, "async same-attr": araw,
            "async tracescore": tracescore.agent(name="bench")(aanswer)}


# (function, processor) pairs timed; tracescore+oi under Simple only (its ratio is to tracescore)
_GRID: tuple[tuple[str, str], ...] = (
    ("bare", "simple"), ("minimal", "simple"),
    ("same-attr", "simple"), ("same-attr", "batch"),
    ("same-attr", "configure(batch=False)"), ("same-attr", "configure(batch=True)"),
    ("tracescore", "simple"), ("tracescore", "batch"),
    ("tracescore", "configure(batch=False)"), ("tracescore", "configure(batch=True)"),
    ("tracescore+oi", "simple"),
)


def build_cases(tracer: trace.Tracer, switch: _Switch) -> dict[str, Callable[[], Any]]:
    """`"{flavour} {function} | {processor}"` -> a call of that function under that processor.
    Every case pays the same two assignments (processor and content settings) per call."""
    functions = build_functions(tracer)
    off = _config.set_content_capture(True, redact=True, openinference=False)
    on = dataclasses.replace(off, openinference=True)
    cases: dict[str, Callable[[], Any]] = {}
    for flavour in ("sync", "async"):
        for function, processor_name in _GRID:
            fn = functions[f"{flavour} {function.removesuffix('+oi')}"]
            settings = on if function.endswith("+oi") else off
            processor = switch.processors[processor_name]
            cases[f"{flavour} {function} | {processor_name}"] = _case(
                switch, processor, settings, fn, asynchronous=flavour == "async")
    return cases


def _case(switch: _Switch, processor: SpanProcessor, settings: _config.ContentSettings,
          fn: Callable[[str], Any], *, asynchronous: bool) -> Callable[[], Any]:
    if asynchronous:
        async def arun() -> Any:
            switch.current = processor
            _config._settings = settings
            return await fn(QUESTION)

        return arun

    def run() -> Any:
        switch.current = processor
        _config._settings = settings
        return fn(QUESTION)

    return run


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds/calls (smoke run)")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--calls", type=int, default=None, help="calls per round and case")
    parser.add_argument("--json", dest="json_path", default=None, help="write figures here")
    args = parser.parse_args(argv)
    # Many short rounds: the interleaving then spreads a busy host's noise evenly over the cases,
    # and each round's ratios compare cases timed moments apart.
    rounds = args.rounds or (9 if args.quick else 31)
    calls = args.calls or (500 if args.quick else 1_000)

    exporter = _DiscardExporter()
    switch = _Switch(_processors(exporter))
    provider = TracerProvider()
    provider.add_span_processor(switch)
    trace.set_tracer_provider(provider)
    tracer = provider.get_tracer("bench")
    tracescore.set_content_capture(True, redact=True)

    cases = build_cases(tracer, switch)
    cpu_samples: dict[str, list[float]] = {}
    wall_samples: dict[str, list[float]] = {}
    cpu = interleaved(cases, rounds=rounds, n=calls, clock="process", settle=switch.settle,
                      samples=cpu_samples)
    wall = interleaved(cases, rounds=rounds, n=calls, clock="wall", settle=switch.settle,
                       samples=wall_samples)
    samples = {**{f"cpu {k}": v for k, v in cpu_samples.items()},
               **{f"wall {k}": v for k, v in wall_samples.items()}}
    assert exporter.count > 0
    switch.shutdown()

    results: dict[str, Any] = {"environment": environment(), "rounds": rounds, "calls": calls,
                               "clock": "process CPU (all threads) and calling-thread wall"}
    rows = []
    for flavour in ("sync", "async"):
        figures: dict[str, Any] = {}
        for function, processor in _GRID:
            key = f"{function} | {processor}"
            figures[key] = {"cpu_ns": cpu[f"{flavour} {key}"], "wall_ns": wall[f"{flavour} {key}"]}
        results[flavour] = figures
        ratios = _ratios({key: {"cpu": cpu_samples[f"{flavour} {key}"],
                                "wall": wall_samples[f"{flavour} {key}"]} for key in figures})
        results[flavour]["ratios"] = ratios
        for key, figure in figures.items():
            if key != "ratios":
                ratio = ratios.get(key, {})
                rows.append([flavour, key, figure["cpu_ns"] / 1000, figure["wall_ns"] / 1000,
                             ratio.get("cpu"), ratio.get("wall"), ratio.get("cpu_vs_own_setup")])
    print_table(
        rows,
        ["function", "function | span processor", "process CPU us/call", "wall us/call",
         "CPU vs baseline", "wall vs baseline", "CPU vs own SDK setup"],
        title=f"Decorator cost (median of {rounds} interleaved rounds x {calls} calls; ratios: "
              "median of the per-round ratios to the baseline, the same-attribute hand-written "
              "span under the same span processor)",
    )
    for flavour in ("sync", "async"):
        for key, target in _TARGETS.items():
            ratio = results[flavour]["ratios"][key]["cpu"]
            verdict = "OK" if ratio <= target else "ABOVE TARGET"
            print(f"{flavour}: {key} / same-attr span, same processor, process CPU = "
                  f"{ratio:.3f} (target <= {target}) {verdict}")
        for key, own in _OWN_SETUP.items():
            ratio = results[flavour]["ratios"][key]["cpu_vs_own_setup"]
            print(f"{flavour}: {key} / same-attr span under your own {own}, process CPU = "
                  f"{ratio:.3f} (the pipeline's guard included)")
    results["noise"] = _noise(samples)
    print("noise: spread of the per-round figures, (max - min) / median, median over cases: "
          + ", ".join(f"{k} {v:.0%}" for k, v in results["noise"].items()))
    write_json(args.json_path, results)
    return results


_PROCESSORS = ("simple", "batch", "configure(batch=False)", "configure(batch=True)")
_TARGETS = {f"tracescore | {processor}": 1.0 for processor in _PROCESSORS}
# what a user would otherwise set up in place of each configure() pipeline
_OWN_SETUP = {"tracescore | configure(batch=False)": "simple",
              "tracescore | configure(batch=True)": "batch"}


def _ratios(rounds: dict[str, dict[str, list[float]]]) -> dict[str, dict[str, float]]:
    """Each case over the same-attr span under the same processor (CPU and wall); the
    configure() cases also over the same-attr span under the user's own SDK processor
    (`*_vs_own_setup`); + openinference over tracescore. Each ratio is the median of the
    per-round ratios: cases of one round ran moments apart, under the same load."""

    def paired(a: list[float], b: list[float]) -> float:
        return statistics.median(x / y for x, y in zip(a, b))

    out: dict[str, dict[str, float]] = {}
    for key, figure in rounds.items():
        function, processor = key.split(" | ")
        base = "tracescore | simple" if function == "tracescore+oi" else f"same-attr | {processor}"
        if key != base:
            out[key] = {clock: paired(figure[clock], rounds[base][clock])
                        for clock in ("cpu", "wall")}
        own = _OWN_SETUP.get(key) or _OWN_SETUP.get(key.replace("same-attr", "tracescore"))
        if own is not None:
            out.setdefault(key, {}).update(
                {f"{clock}_vs_own_setup": paired(figure[clock], rounds[f"same-attr | {own}"][clock])
                 for clock in ("cpu", "wall")})
    return out


def _noise(samples: dict[str, list[float]]) -> dict[str, float]:
    """How steady the host was: per clock, the median over cases of (max - min) / median of the
    per-round figures."""
    out: dict[str, float] = {}
    for clock in ("cpu", "wall"):
        spreads = [(max(v) - min(v)) / statistics.median(v)
                   for name, v in samples.items() if name.startswith(clock) and "bare" not in name]
        out[f"{clock}_round_spread"] = statistics.median(spreads)
    return out


if __name__ == "__main__":
    main()
