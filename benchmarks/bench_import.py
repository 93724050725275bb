"""Import time of tracescore against OpenTelemetry's own, in fresh interpreters.

Each case runs in a new subprocess that times its import statement with perf_counter (so
interpreter start-up is not counted); the cases alternate, and the median over N processes is
reported with its ratio to `import opentelemetry.trace`. "otel sdk + asyncio" is what a
traced async agent imports anyway (wrapt, which tracescore needs, imports asyncio). The run
also checks that `import tracescore` leaves litellm and rapidfuzz unimported (lazy loading).

    python benchmarks/bench_import.py [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _common import environment, percentiles, print_table, write_json

BASELINE = "otel api"
CASES = {
    BASELINE: "import opentelemetry.trace",
    "otel sdk": "import opentelemetry.sdk.trace",
    "otel sdk + asyncio": "import asyncio, opentelemetry.sdk.trace",
    "tracescore": "import tracescore",
    "tracescore agent+configure": "from tracescore import agent, configure",
    "tracescore command": "import tracescore.cli._app",  # what `tracescore --help` loads
}
HEAVY = ("litellm", "rapidfuzz")

_PROBE = """
import sys, time, json
t0 = time.perf_counter()
{stmt}
t1 = time.perf_counter()
print(json.dumps({{"ms": (t1 - t0) * 1000, "heavy": [m for m in {heavy!r} if m in sys.modules]}}))
"""


def _one(stmt: str) -> dict[str, Any]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE.format(stmt=stmt, heavy=HEAVY)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer processes (smoke run)")
    parser.add_argument("-n", type=int, default=None, help="processes per case")
    parser.add_argument("--json", dest="json_path", default=None, help="write figures here")
    args = parser.parse_args(argv)
    n = args.n or (11 if args.quick else 31)

    for stmt in CASES.values():  # warm the OS file cache and .pyc files first
        _one(stmt)
    samples: dict[str, list[float]] = {name: [] for name in CASES}
    heavy: dict[str, list[str]] = {}
    for _ in range(n):
        for name, stmt in CASES.items():
            res = _one(stmt)
            samples[name].append(res["ms"])
            heavy[name] = res["heavy"]

    base = statistics.median(samples[BASELINE])
    results: dict[str, Any] = {"environment": environment(), "processes": n, "cases": {}}
    rows = []
    for name, stmt in CASES.items():
        med = statistics.median(samples[name])
        p90 = percentiles(samples[name], [90])[0]
        results["cases"][name] = {
            "statement": stmt,
            "median_ms": med,
            "p90_ms": p90,
            "ratio_to_otel_api": med / base,
            "heavy_modules_loaded": heavy[name],
        }
        rows.append([stmt, med, p90, med / base, ", ".join(heavy[name]) or "none"])
    print_table(
        rows,
        ["statement", "median ms", "p90 ms", "x otel api", "litellm/rapidfuzz loaded"],
        title=f"Import time in fresh interpreters (median of {n} processes per case)",
    )
    lazy = not results["cases"]["tracescore"]["heavy_modules_loaded"]
    results["tracescore_imports_lazily"] = lazy
    print(f"import tracescore loads litellm/rapidfuzz: {'no (OK)' if lazy else 'YES'}")
    write_json(args.json_path, results)
    return results


if __name__ == "__main__":
    main()
