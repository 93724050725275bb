"""This checkout against an earlier git revision, side by side in one run: the hot paths a
redesign must not make slower.

    python benchmarks/bench_revisions.py --baseline REV [--rounds 3] [--quick] [--cases ...]
        [--json PATH]

The baseline's `tracescore/` and `benchmarks/` are exported with `git archive REV` into a
temporary directory. Every round measures each case once for each tree, in alternating order;
the figures are medians over the rounds, and the ratio is the median of the rounds' this tree /
baseline ratios (for a cost, below 1: this tree costs less).

  decorator      process CPU per `@tracescore.agent` call under configure(batch=False)'s
                 pipeline, and over the same-attribute hand-written span there (this checkout's
                 `bench_decorators` cases, in a fresh process importing the tree's package);
  hand-off       CPU in the agent's thread per decorated call: tracing alone, with a
                 ScoringSpanProcessor that samples nothing, and with one that samples every call
                 with its scorer busy (each tree's own `bench_online.per_call_overhead`: the
                 copies differ only in how they route calls to the processor under test);
  pass-through   `tracescore serve` of the tree on one core: OTLP/gRPC 512-span requests with
                 nothing to score, gateway CPU per forwarded span and spans/s (`bench_gateway`);
  scoring        scores/s as % of the ideal: in process (an in-process sleep judge, each tree's
                 `bench_online.throughput`) and through the gateway (relevancy, stub judge over
                 HTTP, `bench_gateway.scoring`), with the CPU per relevancy score (3 judge calls)
                 of the gateway and of its scoring process (the judge client's share).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import environment, print_table, write_json

JUDGE_S = 0.2  # the gateway's stub judge, per call
# figure -> (unit, which way is better); the rows of the table, in order
FIGURES: dict[str, tuple[str, str]] = {
    "decorator: @agent CPU": ("us/call", "lower"),
    "decorator: @agent / same-attr span": ("ratio", "lower"),
    "hand-off: tracing alone": ("us/call", "lower"),
    "hand-off: unsampled": ("us/call", "lower"),
    "hand-off: sampled, scorer busy": ("us/call", "lower"),
    "pass-through: gateway CPU": ("us/span", "lower"),
    "pass-through: spans/s": ("spans/s", "higher"),
    "scoring in process: % of ideal": ("%", "higher"),
    "scoring through the gateway: % of ideal": ("%", "higher"),
    "scoring through the gateway: scoring-process CPU": ("ms/score", "lower"),
    "scoring through the gateway: gateway CPU": ("ms/score", "lower"),
}


# --- cases run in a fresh process whose PYTHONPATH puts the tree's package first ---------------
def _decorator(calls: int) -> dict[str, float]:
    from _common import interleaved
    from bench_decorators import _DiscardExporter, _processors, _Switch, build_cases
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    import tracescore

    switch = _Switch(_processors(_DiscardExporter()))
    provider = TracerProvider()
    provider.add_span_processor(switch)
    trace.set_tracer_provider(provider)
    tracescore.set_content_capture(True, redact=True)
    cases = {name: case for name, case in build_cases(provider.get_tracer("bench"), switch).items()
             if name in ("sync tracescore | configure(batch=False)",
                         "sync same-attr | configure(batch=False)")}
    samples: dict[str, list[float]] = {}
    interleaved(cases, rounds=5, n=calls, clock="process", settle=switch.settle, samples=samples)
    ours, theirs = (samples[f"sync {f} | configure(batch=False)"] for f in ("tracescore", "same-attr"))
    switch.shutdown()
    return {"decorator: @agent CPU": statistics.median(ours) / 1000,
            "decorator: @agent / same-attr span": statistics.median(
                a / b for a, b in zip(ours, theirs))}


def _online(tree: Path, calls: int) -> dict[str, float]:
    sys.path.insert(0, str(tree / "benchmarks"))  # the tree's own bench_online
    import bench_online as bench
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    provider = TracerProvider()
    provider.add_span_processor(bench._switch)
    trace.set_tracer_provider(provider)
    overhead = bench.per_call_overhead(rounds=3, n=calls)
    latency = 0.05
    run = bench.throughput(bench.InstantScorer(sleep_s=latency), latency, 8, 160)
    return {"hand-off: tracing alone": overhead["tracing"][0] / 1000,
            "hand-off: unsampled": overhead["unsampled"][0] / 1000,
            "hand-off: sampled, scorer busy": overhead["sampled-handoff"][0] / 1000,
            "scoring in process: % of ideal": 100 * run["ratio"]}


def _in_fresh_process(case: str, tree: Path, calls: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    out = subprocess.run([sys.executable, str(HERE / "bench_revisions.py"), "--worker", case,
                          "--tree", str(tree), "--calls", str(calls)], env=env, check=True,
                         capture_output=True, text=True, cwd=tree).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


# --- cases run here, against a gateway process of the tree -------------------------------------
def _pass_through(tree: Path, workdir: Path, seconds: float) -> dict[str, float]:
    import bench_gateway as gw

    sink = gw.Sink()
    try:
        gateway = gw.GatewayUnderTest(sink, workdir, max(os.sched_getaffinity(0)), checkout=tree)
        try:
            rate, cpu_us = gw.grpc_throughput(gateway.address, gateway.pid, sink, seconds)
        finally:
            gateway.close()
    finally:
        sink.close()
    return {"pass-through: gateway CPU": cpu_us, "pass-through: spans/s": rate}


def _scoring(tree: Path, workdir: Path, spans: int) -> dict[str, float]:
    import bench_gateway as gw

    scored = gw.scoring(1, workdir, JUDGE_S, spans, concurrency=8, checkout=tree)
    return {"scoring through the gateway: % of ideal": scored["ratio"],
            "scoring through the gateway: scoring-process CPU":
                scored["scoring_process_cpu_ms_per_score"],
            "scoring through the gateway: gateway CPU": scored["gateway_cpu_ms_per_score"]}


def _export(rev: str, into: Path) -> Path:
    """`tracescore/` and `benchmarks/` of `rev`, as files under `into`."""
    archive = subprocess.run(["git", "archive", rev, "tracescore", "benchmarks"], cwd=HERE.parent,
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", metavar="REV", help="git revision to compare with")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="shorter cases (smoke run)")
    parser.add_argument("--cases", default="decorator,online,pass-through,scoring",
                        help="comma list of: decorator, online, pass-through, scoring")
    parser.add_argument("--json", dest="json_path", default=None, help="write figures here")
    parser.add_argument("--worker", choices=["decorator", "online"], help=argparse.SUPPRESS)
    parser.add_argument("--tree", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--calls", type=int, default=1000, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        figures = _decorator(args.calls) if args.worker == "decorator" else _online(args.tree,
                                                                                 args.calls)
        print(json.dumps(figures), flush=True)
        os._exit(0)  # daemon threads of the processors under test: no need to wait for them
    if not args.baseline:
        parser.error("--baseline REV is required")
    calls, seconds, spans = (500, 3.0, 32) if args.quick else (1000, 5.0, 48)
    with tempfile.TemporaryDirectory(prefix="bench-revisions-") as tmp:
        trees = {"this tree": HERE.parent, args.baseline: _export(args.baseline, Path(tmp))}
        workdir = Path(tmp) / "work"
        workdir.mkdir()
        cases: dict[str, Callable[[Path], dict[str, float]]] = {
            "decorator": lambda tree: _in_fresh_process("decorator", tree, calls),
            "online": lambda tree: _in_fresh_process("online", tree, calls),
            "pass-through": lambda tree: _pass_through(tree, workdir, seconds),
            "scoring": lambda tree: _scoring(tree, workdir, spans),
        }
        chosen = [cases[name] for name in args.cases.split(",")]
        samples: dict[str, dict[str, list[float]]] = {name: {} for name in trees}
        names = list(trees)
        for r in range(args.rounds):
            for case in chosen:
                for name in names[r % 2:] + names[:r % 2]:
                    for figure, value in case(trees[name]).items():
                        samples[name].setdefault(figure, []).append(value)
    ours, base = samples["this tree"], samples[args.baseline]
    # each round's ratio compares runs moments apart: steadier than a ratio of medians
    ratios = {f: statistics.median(a / b for a, b in zip(ours[f], base[f])) for f in ours}
    rows = [[figure, unit, statistics.median(ours[figure]), statistics.median(base[figure]),
             ratios[figure], better] for figure, (unit, better) in FIGURES.items() if figure in ours]
    print_table(rows, ["figure", "unit", "this tree", args.baseline, "ratio", "better"],
                title=f"This tree against {args.baseline} (medians of {args.rounds} alternating "
                      "rounds; ratio: median of the rounds' ratios)")
    results = {"environment": environment(), "baseline": args.baseline, "rounds": args.rounds,
               "samples": samples, "ratios": ratios}
    write_json(args.json_path, results)
    return results


if __name__ == "__main__":
    main()
