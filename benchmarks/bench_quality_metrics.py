"""What the quality metrics cost: CPU per scored call and per unscored call, in process and in
the gateway, this checkout against an earlier git revision side by side in one run.

    python benchmarks/bench_quality_metrics.py --baseline REV [--rounds 3] [--calls 2000]
        [--json PATH]

  in process   process CPU (the agent's thread and the scoring thread) per agent call through a
               ScoringSpanProcessor with an SDK MeterProvider (a pull reader), content
               similarity scoring every call ("scored"), or a rate limit refusing every call
               after the first ("unscored": counted by reason); each tree in a fresh process
  gateway      CPU of a `tracescore serve` process of the tree per agent span sent over
               OTLP/gRPC, similarity scoring every span ("scored") or a rate limit refusing them
               ("unscored"); the gateway's own /metrics reader is on in this tree

Rounds alternate the trees; figures are medians over the rounds and the ratio is the median of
the rounds' this tree / baseline ratios (above 1: this tree costs more).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import environment, print_table, write_json

FIGURES = ("in process, scored", "in process, unscored", "gateway, scored", "gateway, unscored")
QUESTION = "What is the capital of France?"
ANSWER = "Paris is the capital of France."


# --- in process: run in a fresh process whose PYTHONPATH puts the tree's package first ----------
def _in_process(calls: int, unscored: bool) -> float:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

    import tracescore
    from tracescore.instrument._calls import AgentCall, notify_agent_call
    from tracescore.online import OnlineScorer, ScoringSpanProcessor

    class Discard(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    limit: dict[str, Any] = {"rate_limit_per_minute": 1} if unscored else {}
    scorer = OnlineScorer(tracescore.create_content_similarity_scorer(), **limit)
    reader = InMemoryMetricReader()
    provider = TracerProvider()
    provider.add_span_processor(ScoringSpanProcessor(
        SimpleSpanProcessor(Discard()), [scorer], isolation="thread",
        meter_provider=MeterProvider(metric_readers=[reader])))
    tracer = provider.get_tracer("bench")
    attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}

    def call() -> None:
        with tracer.start_as_current_span("invoke_agent support", attributes=attrs) as span:
            notify_agent_call(AgentCall(span=span, name="support", input=QUESTION, output=ANSWER,
                                        error=None, ground_truth=ANSWER, attributes=attrs))

    for _ in range(200):  # warm-up (and the rate limit's one token)
        call()
    provider.force_flush(60_000)
    start = time.process_time()
    for _ in range(calls):
        call()
    provider.force_flush(60_000)
    cost = (time.process_time() - start) / calls * 1e6
    reader.get_metrics_data()  # the metrics were recorded (and are collectable)
    return cost


# --- the gateway: a `tracescore serve` process of the tree --------------------------------------
def _gateway(tree: Path, workdir: Path, calls: int, unscored: bool) -> float:
    import bench_gateway as gw

    limit = "\n      rate_limit_per_minute: 1" if unscored else ""
    config = (f"scoring:\n  queue_size: {calls}\n  max_held_spans: {calls}\n  scorers:\n"
              f"    - scorer: similarity{limit}\n")
    sink = gw.Sink()
    try:
        gateway = gw.GatewayUnderTest(sink, workdir, None, config=config, checkout=tree)
        try:
            export = gw._stub(gateway.address)
            rng = random.Random(7)
            warm = 50
            for _ in range(warm):
                export(gw.agent_request(rng), timeout=30)
            gw._wait_count(sink, warm, 120)
            bodies = [gw.agent_request(rng) for _ in range(calls)]
            before = gw._cpu_s(gateway.pid)
            for body in bodies:
                export(body, timeout=30)
            gw._wait_count(sink, warm + calls, 300)
            return (gw._cpu_s(gateway.pid) - before) / calls * 1e6
        finally:
            gateway.close()
    finally:
        sink.close()


def _fresh(tree: Path, calls: int, unscored: bool) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    out = subprocess.run(
        [sys.executable, str(HERE / "bench_quality_metrics.py"), "--worker",
         "unscored" if unscored else "scored", "--calls", str(calls)],
        env=env, check=True, capture_output=True, text=True, cwd=tree).stdout
    return float(out.strip().splitlines()[-1])


def _export(rev: str, into: Path) -> Path:
    archive = subprocess.run(["git", "archive", rev, "tracescore", "benchmarks"], cwd=HERE.parent,
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", metavar="REV", help="git revision to compare with")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--json", dest="json_path", default=None, help="write figures here")
    parser.add_argument("--worker", choices=["scored", "unscored"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(_in_process(args.calls, args.worker == "unscored"), flush=True)
        os._exit(0)  # the processor's daemon threads: no need to wait for them
    if not args.baseline:
        parser.error("--baseline REV is required")
    with tempfile.TemporaryDirectory(prefix="bench-quality-") as tmp:
        trees = {"this tree": HERE.parent, args.baseline: _export(args.baseline, Path(tmp))}
        workdir = Path(tmp) / "work"
        workdir.mkdir()
        cases: dict[str, Callable[[Path], float]] = {
            "in process, scored": lambda tree: _fresh(tree, args.calls, False),
            "in process, unscored": lambda tree: _fresh(tree, args.calls, True),
            "gateway, scored": lambda tree: _gateway(tree, workdir, args.calls // 2, False),
            "gateway, unscored": lambda tree: _gateway(tree, workdir, args.calls // 2, True),
        }
        samples: dict[str, dict[str, list[float]]] = {name: {} for name in trees}
        names = list(trees)
        for r in range(args.rounds):
            for figure, case in cases.items():
                for name in names[r % 2:] + names[:r % 2]:
                    samples[name].setdefault(figure, []).append(case(trees[name]))
    ours, base = samples["this tree"], samples[args.baseline]
    ratios = {f: statistics.median(a / b for a, b in zip(ours[f], base[f])) for f in FIGURES}
    rows = [[f, "us CPU/call", statistics.median(ours[f]), statistics.median(base[f]),
             statistics.median(ours[f]) - statistics.median(base[f]), ratios[f]]
            for f in FIGURES]
    print_table(rows, ["figure", "unit", "this tree", args.baseline, "difference", "ratio"],
                title=f"Quality metrics: this tree against {args.baseline} (medians of "
                      f"{args.rounds} alternating rounds; ratio: median of the rounds' ratios)")
    results = {"environment": environment(), "baseline": args.baseline, "rounds": args.rounds,
               "samples": samples, "ratios": ratios}
    write_json(args.json_path, results)
    print(json.dumps({f: round(r, 3) for f, r in ratios.items()}))
    return results


if __name__ == "__main__":
    main()
