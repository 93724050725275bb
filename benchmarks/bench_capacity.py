"""The gateway's capacity model, checked against measured points, and its projection.

A replica scores at most

    min(concurrency / (calls x latency), cores / cpu)   scores/s

- `concurrency` scoring slots (`scoring.concurrency`), each busy for `calls` judge calls of
  `latency` seconds per score (relevancy: 3 calls);
- `cpu` seconds of CPU per score in the gateway and its scoring process together (request
  building, reply parsing, spans), on `cores` cores the replica may use.

Measured here with `tracescore serve` replicas and a stub judge of fixed latency (the scoring
part of bench_gateway.py): 1, 2 and 3 replicas at one concurrency, the model's prediction beside
each (its cpu measured at 1 replica), then the projection for 1M scored calls an hour with a
1 s judge: replicas and cores for several concurrencies.

    python benchmarks/bench_capacity.py [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import environment, print_table, write_json
from bench_gateway import scoring

CALLS = 3  # relevancy's judge calls per score
PER_HOUR = 1_000_000


def predicted(replicas: int, concurrency: int, latency_s: float, cpu_s: float,
              cores: float) -> float:
    """Scores/s of `replicas` replicas sharing `cores` cores."""
    latency_bound = replicas * concurrency / (CALLS * latency_s)
    cpu_bound = cores / cpu_s if cpu_s > 0 else math.inf
    return min(latency_bound, cpu_bound)


def cpu_per_score(run: dict[str, Any], seconds: float, spans: int) -> float:
    """CPU seconds per score of the gateways and their scoring processes in `run`."""
    share = run["cpu_share"]
    used = share["gateways_pct"] + share["scoring processes_pct"]
    return used / 100.0 * (os.cpu_count() or 1) * seconds / spans


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json")
    args = parser.parse_args()
    latency, concurrency = 0.5, 8
    per_replica = 48 if args.quick else 96  # scores per replica: several slot rounds
    cores = float(os.cpu_count() or 1)
    results: dict[str, Any] = {"environment": environment(), "latency_s": latency,
                               "concurrency": concurrency, "runs": {}}
    with tempfile.TemporaryDirectory(prefix="bench-capacity-") as tmp:
        for replicas in (1, 2, 3):
            spans = per_replica * replicas
            run = scoring(replicas, Path(tmp), latency, spans, concurrency)
            run["seconds"] = spans / run["scores_per_s"]
            run["cpu_per_score_s"] = cpu_per_score(run, run["seconds"], spans)
            results["runs"][replicas] = run
    cpu = results["runs"][1]["cpu_per_score_s"]
    rows = []
    for replicas, run in results["runs"].items():
        model = predicted(replicas, concurrency, latency, cpu, cores)
        rows.append([replicas, run["scores_per_s"], model, 100.0 * run["scores_per_s"] / model,
                     1000.0 * run["cpu_per_score_s"]])
    print_table(rows, ["replicas", "measured scores/s", "model scores/s", "measured % of model",
                       "CPU ms/score"],
                title=f"Capacity (relevancy, {CALLS} judge calls of {latency} s, concurrency "
                      f"{concurrency} per replica, {cores:.0f} cores shared)")
    need = PER_HOUR / 3600.0
    projection = []
    for slots in (8, 32, 64, 128):
        per = predicted(1, slots, 1.0, cpu, 1.0)  # one core per replica
        replicas = math.ceil(need / per)
        projection.append([slots, per, replicas, need * cpu])
    results["projection"] = projection
    print_table(projection, ["concurrency", "scores/s a replica (1 core)", "replicas",
                             "cores of CPU in all"],
                title=f"1M scored calls an hour ({need:.0f}/s) with a 1 s judge, "
                      f"{1000 * cpu:.1f} ms CPU per score")
    write_json(args.json, results)


if __name__ == "__main__":
    main()
