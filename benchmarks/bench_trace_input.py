"""Hot-path cost of collecting tool calls and context for scorers, against a baseline checkout.

An agent call that makes three tool calls (`@tracescore.agent` + 3 x `@tracescore.tool`, content
capture on), CPU ns per call in the agent's thread, for:
    tracing          tracing alone (no scorer);
    unsampled        a ScoringSpanProcessor whose scorer samples nothing (rate 0);
    sampled-handoff  every call sampled, the scorer busy (jobs queue up): the agent's share;
    sampled-no-tools the same for an agent call without tool calls.
And the gateway's engine (`Engine.accept`, no network) on requests of 512 GenAI tool spans
(64 traces, no agent span), CPU ns per span:
    gateway-unsampled  no scorer samples these traces (rate 0): nothing is buffered;
    gateway-sampled    every trace may be sampled (rate 1): every span feeds the trace buffer.
Each round runs this tree and the baseline tree (`--baseline DIR`, e.g. a worktree of main) in
fresh processes, in alternating order; medians over the rounds and the ratios are printed side
by side. Target: unsampled unchanged (ratio ~1.0); sampled-handoff within a few microseconds.

    python benchmarks/bench_trace_input.py --baseline ../main [--rounds 7] [--calls 3000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CASES = ("tracing", "unsampled", "sampled-handoff", "sampled-no-tools", "gateway-unsampled",
         "gateway-sampled")


def _worker(calls: int) -> dict[str, float]:
    """One round in this process: CPU ns per agent call for each case (imports from sys.path)."""
    import asyncio
    import gc
    import threading
    import time

    from opentelemetry import trace
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
    from opentelemetry.sdk.trace.export import (
        SimpleSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    import tracescore
    from tracescore.online import OnlineScorer, ScoringSpanProcessor
    from tracescore.scoring import Scorer, ScoreResult

    class Discard(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    class Switch(SpanProcessor):
        delegate: Any = SimpleSpanProcessor(Discard())

        def on_start(self, span: Any, parent_context: Any = None) -> None:
            self.delegate.on_start(span, parent_context=parent_context)

        def on_end(self, span: Any) -> None:
            self.delegate.on_end(span)

    class Busy(Scorer):
        id, name, uses_judge = "busy", "Busy", False

        def __init__(self) -> None:
            self.gate = threading.Event()  # never opens: jobs queue up

        async def arun(self, *, input: Any, output: Any, ground_truth: Any = None,
                       run_id: str | None = None) -> ScoreResult:
            while not self.gate.is_set():
                await asyncio.sleep(0.05)
            raise AssertionError("unreachable")

    switch = Switch()
    provider = TracerProvider()
    provider.add_span_processor(switch)
    trace.set_tracer_provider(provider)

    @tracescore.tool
    def search(query: str) -> str:
        return f"Refunds take 5 days ({query})."

    @tracescore.agent(name="bench")
    def agent(question: str) -> str:
        for _ in range(3):
            search(question)
        return "Refunds take 5 days."

    @tracescore.agent(name="bench")
    def bare(question: str) -> str:
        return "Refunds take 5 days."

    def build(case: str) -> Any:
        if case == "tracing":
            return None
        if case == "unsampled":
            return ScoringSpanProcessor(SimpleSpanProcessor(Discard()),
                                        [OnlineScorer(Busy(), rate=0.0)], isolation="thread")
        return ScoringSpanProcessor(SimpleSpanProcessor(Discard()), [Busy()], concurrency=1,
                                    queue_size=calls + 10, max_held_spans=calls + 10,
                                    max_wait_s=3600, shutdown_timeout_s=0.01,
                                    isolation="thread")

    figures: dict[str, float] = {}
    agent_cases = CASES[:4]
    for case in (*agent_cases, *agent_cases):  # the first pass warms up
        processor = build(case)
        switch.delegate = processor or SimpleSpanProcessor(Discard())
        gc.collect()
        call = bare if case == "sampled-no-tools" else agent
        start = time.thread_time_ns()
        for _ in range(calls):
            call("refund for order 7")
        figures[case] = (time.thread_time_ns() - start) / calls
        switch.delegate = SimpleSpanProcessor(Discard())
        if processor is not None:
            processor.shutdown()
    figures.update(_gateway(calls))
    return figures


def _gateway(calls: int) -> dict[str, float]:
    """CPU ns per span of `Engine.accept` on GenAI tool spans, unsampled and sampled."""
    import json
    import random
    import time

    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    from tracescore.gateway._engine import Engine
    from tracescore.gateway._metrics import GatewayMetrics
    from tracescore.online import OnlineScorer
    from tracescore.online.intake import as_recognisers
    from tracescore.scoring import create_content_similarity_scorer

    rng = random.Random(7)
    request = ExportTraceServiceRequest()
    ss = request.resource_spans.add().scope_spans.add()
    traces = [(rng.randbytes(16), rng.randbytes(8)) for _ in range(64)]
    for index in range(512):
        trace_id, agent_id = traces[index % 64]
        span = ss.spans.add(name="execute_tool search", kind=1,
                            start_time_unix_nano=1_700_000_000_000_000_000 + index,
                            end_time_unix_nano=1_700_000_000_001_000_000 + index)
        span.trace_id, span.span_id, span.parent_span_id = trace_id, rng.randbytes(8), agent_id
        for key, value in (("gen_ai.operation.name", "execute_tool"),
                           ("gen_ai.tool.name", "search"),
                           ("gen_ai.tool.call.arguments", json.dumps({"query": f"q{index}"})),
                           ("gen_ai.tool.call.result", f"Refunds take {index} days.")):
            span.attributes.add(key=key).value.string_value = value
    raw = request.SerializeToString()

    class Discard:
        def put(self, ids: Any, body: bytes, count: int) -> None:
            pass

    figures = {}
    rounds = max(1, calls // 100)
    for case, rate in (("gateway-unsampled", 0.0), ("gateway-sampled", 1.0)):
        engine = Engine(scorers=[OnlineScorer(create_content_similarity_scorer(), rate=rate)],
                        recognisers=as_recognisers(["genai", "openinference"], "bench"),
                        output=Discard(), metrics=GatewayMetrics(),
                        processor_options={"isolation": "thread"})
        for _ in range(2):  # warm up
            engine.accept(ExportTraceServiceRequest.FromString(raw), raw)
        start = time.thread_time_ns()
        for _ in range(rounds):
            engine.accept(ExportTraceServiceRequest.FromString(raw), raw)
        figures[case] = (time.thread_time_ns() - start) / (rounds * 512)
        engine.shutdown(1)
    return figures


def _round(tree: Path, calls: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    out = subprocess.run([sys.executable, str(HERE / "bench_trace_input.py"), "--worker",
                          "--calls", str(calls)], env=env, check=True, capture_output=True,
                         text=True, cwd=tree).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="checkout to compare with")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(_worker(args.calls)))
        return {}
    trees = {"this tree": HERE.parent}
    if args.baseline is not None:
        trees["baseline"] = args.baseline.resolve()
    samples: dict[str, dict[str, list[float]]] = {t: {c: [] for c in CASES} for t in trees}
    names = list(trees)
    for r in range(args.rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            for case, ns in _round(trees[name], args.calls).items():
                samples[name][case].append(ns)
    medians = {t: {c: statistics.median(v) for c, v in cases.items()}
               for t, cases in samples.items()}
    print(f"CPU us per agent call with 3 tool calls; gateway-*: per span "
          f"(median of {args.rounds} rounds)")
    print(f"{'case':18}" + "".join(f"{t:>14}" for t in trees)
          + ("   this/baseline" if "baseline" in trees else ""))
    for case in CASES:
        row = f"{case:18}" + "".join(f"{medians[t][case] / 1000:14.1f}" for t in trees)
        if "baseline" in trees:
            row += f"{medians['this tree'][case] / medians['baseline'][case]:16.3f}"
        print(row)
    return medians


if __name__ == "__main__":
    main()
