"""The gateway's capacity model against measured points, side by side (docs/gateway.md,
"How many replicas").

Model, per replica: a score holds one of `concurrency` slots for `calls` judge calls of
`latency` seconds plus `overhead` seconds of its own, and costs `cpu` seconds of CPU (gateway
and scoring process), of which the scoring process (one core at most) takes `cpu_scoring`:

    scores/s = min(concurrency / (calls * latency + overhead), 1 / cpu_scoring)

Measured: `bench_gateway.scoring` (relevancy, 3 judge calls, the stub judge with a fixed delay)
at 1, 2 and 3 replicas; `overhead` and `cpu` are taken from the 1-replica run, the others are
predicted from it. Then the projection for 1M scored calls an hour with a 1 s judge.

    python benchmarks/bench_capacity.py [--latency 0.2] [--spans 48] [--json PATH]
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import environment, print_table, write_json

CALLS = 3  # judge calls of a relevancy score


def per_replica(concurrency: int, latency_s: float, overhead_s: float, cpu_scoring_s: float,
                calls: int = CALLS) -> float:
    """Scores/s one replica sustains (the model above)."""
    return min(concurrency / (calls * latency_s + overhead_s), 1.0 / cpu_scoring_s)


def main() -> None:
    import bench_gateway as gw

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.2, help="stub judge delay, s")
    parser.add_argument("--spans", type=int, default=48, help="agent spans per replica")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--json", help="write results to this path")
    args = parser.parse_args()
    runs: dict[int, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-capacity-") as tmp:
        for replicas in (1, 2, 3):
            runs[replicas] = gw.scoring(replicas, Path(tmp), args.latency,
                                        args.spans * replicas, args.concurrency)
    one = runs[1]
    overhead = one["outside_judge_ms_per_score"] / 1000
    cpu_scoring = one["scoring_process_cpu_ms_per_score"] / 1000
    cpu = cpu_scoring + one["gateway_cpu_ms_per_score"] / 1000
    rows = []
    for replicas, run in runs.items():
        predicted = replicas * per_replica(args.concurrency, args.latency, overhead, cpu_scoring)
        rows.append([replicas, run["scores_per_s"], predicted, run["scores_per_s"] / predicted,
                     run["scoring_process_cpu_ms_per_score"] + run["gateway_cpu_ms_per_score"]])
    print_table(rows, ["replicas", "measured scores/s", "model scores/s", "measured/model",
                       "CPU ms/score"],
                title=f"Relevancy through the gateway, stub judge {args.latency} s, concurrency "
                      f"{args.concurrency} (model fitted on 1 replica: overhead "
                      f"{1000 * overhead:.0f} ms/score, CPU {1000 * cpu:.1f} ms/score)")
    target = 1_000_000 / 3600  # scored calls a second
    projection = []
    for concurrency in (8, 32, 64, 128):
        rate = per_replica(concurrency, 1.0, overhead, cpu_scoring)
        replicas = math.ceil(target / rate)
        projection.append([concurrency, rate, replicas, target * cpu])
    print_table(projection, ["concurrency", "scores/s a replica", "replicas", "cores (CPU)"],
                title="1M scored calls an hour (278/s), relevancy, 1 s judge calls")
    write_json(args.json, {"environment": environment(), "runs": runs, "overhead_s": overhead,
                           "cpu_s": cpu, "projection": projection})


if __name__ == "__main__":
    main()
