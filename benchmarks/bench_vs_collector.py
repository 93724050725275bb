"""The gateway against the real OpenTelemetry Collector, per CPU-second, on spans it does not hold.

The same offered load from an independent generator (the Collector contrib repo's `telemetrygen`
at the release the project's collector is built from: 4 workers, 10-span traces, a fixed rate)
goes through one middle process pinned to one core, either `tracescore serve` (a scorer
configured, but no span it receives is an agent span: pure pass-through) or the project's
collector build (OTLP receiver -> OTLP exporter, no queue, no processor), into the same counting
OTLP sink. Per run: spans sent and spans that reached the sink (loss), and the middle process's
CPU (user + system, all threads) from the first span to the last arrival; spans per CPU-second
and the ratio gateway / collector (>= 1.0: the gateway is at least as efficient).

Rates: two fixed offered rates, then a ladder of higher ones up to the highest rate both middles
sustain (every span arrives, the generator keeps its pace). The middles run in alternating order,
several rounds each: the machine may be shared, so medians and the rounds' spread are printed.

`--plain` adds a third middle: a plain Python pass-through on grpcio (each request forwarded on
the receiving thread; no journal, no recognition), what the transport alone costs.
`--baseline DIR` adds the gateway of another checkout (e.g. `git worktree add /tmp/base main`)
as a fourth middle, so a change is measured against the revision before it in the same run.
`--profile` (needs `py-spy` installed) records the gateway's threads while they hold the GIL
during one more run at the first rate and prints where that time goes, by part of the path.

    python benchmarks/bench_vs_collector.py [--quick] [--json PATH] [--rates 2000,4800] [--profile]
                                            [--plain] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import environment, print_table, write_json
from bench_gateway import Collector, GatewayUnderTest, PlainPassThrough, Sink, _cpu_s

WORKERS = 4
SPANS_PER_TRACE = 10  # a root and 9 children
GATEWAY = "tracescore serve"
COLLECTOR = "otelcol"
PLAIN = "plain grpcio"  # --plain: forward on the receiving thread, nothing else (the floor)
BASELINE = "baseline gateway"  # --baseline DIR: `tracescore serve` of another checkout
LADDER = (8000, 12000, 16000, 24000, 32000)


def _telemetrygen() -> Path:
    from tracescore.testing._collector import telemetrygen_binary

    return telemetrygen_binary()


def offer(binary: Path, address: str, pid: int, sink: Sink, rate: int, seconds: float
          ) -> dict[str, Any]:
    """Offer `rate` spans/s for `seconds` through the middle process at `address` (`pid`)."""
    per_worker = rate / WORKERS
    traces = max(1, round(per_worker * seconds / SPANS_PER_TRACE))
    sent = WORKERS * traces * SPANS_PER_TRACE
    planned = traces * SPANS_PER_TRACE / per_worker
    command = [str(binary), "traces", "--otlp-endpoint", address, "--otlp-insecure",
               "--workers", str(WORKERS), "--child-spans", str(SPANS_PER_TRACE - 1),
               "--rate", f"{per_worker:g}", "--traces", str(traces),
               "--allow-export-failures"]
    before, cpu_before, started = sink.count, _cpu_s(pid), time.perf_counter()
    subprocess.run(command, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   timeout=3 * planned + 60)
    generated = time.perf_counter() - started
    deadline = time.monotonic() + 10.0
    while sink.count - before < sent and time.monotonic() < deadline:
        time.sleep(0.02)
    arrived = sink.count - before
    cpu = _cpu_s(pid) - cpu_before
    # kept pace: the generator ended within a quarter of the planned time (plus start-up)
    sustained = arrived == sent and generated <= 1.25 * planned + 1.0
    return {"sent": sent, "arrived": arrived, "lost": sent - arrived, "cpu_s": cpu,
            "seconds": generated, "planned_s": planned, "sustained": sustained,
            "spans_per_cpu_s": arrived / cpu if cpu > 0 else 0.0,
            "cpu_us_per_span": 1e6 * cpu / arrived if arrived else 0.0}


# where a sampled stack's time goes: the first part whose frames it contains (order matters)
_PARTS = (
    ("forwarder: gRPC client call (grpcio)", ("tracescore/gateway/_forward.py", "grpc/_channel.py")),
    ("forwarder: hand-off, bookkeeping", ("tracescore/gateway/_forward.py",)),
    ("gateway: decode, marker scan, count, metrics", ("tracescore/gateway/",)),
    ("gRPC server (grpcio: polling, thread pool)", ("grpc/_server.py",)),
    ("other", ("",)),
)


def profile(binary: Path, gateway: Any, sink: Sink, rate: int, seconds: float
            ) -> dict[str, float] | None:
    """% of the gateway's GIL-holding samples per part of the path (py-spy), or None; "samples":
    how many there were (at these rates the process is mostly idle: a few per second)."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        print("(no py-spy: `make venv` installs it with the dev extra)")
        return None
    with tempfile.NamedTemporaryFile(suffix=".txt") as out:
        recorder = subprocess.Popen(
            [spy, "record", "--pid", str(gateway.pid), "--threads", "--gil", "--nonblocking",
             "-r", "250", "-f", "raw", "-o", out.name, "-d", str(round(seconds + 1))],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        offer(binary, gateway.address, gateway.pid, sink, rate, seconds)
        recorder.wait(seconds + 30)
        lines = Path(out.name).read_text().splitlines()
    shares = dict.fromkeys((name for name, _ in _PARTS), 0)
    for line in lines:
        stack, _, samples = line.rpartition(" ")
        part = next(name for name, needles in _PARTS if all(n in stack for n in needles))
        shares[part] += int(samples)
    total = sum(shares.values())
    return {"samples": total,
            **{name: 100 * count / (total or 1) for name, count in shares.items()}}


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    rates = [run["spans_per_cpu_s"] for run in runs]
    return {"spans_per_cpu_s": statistics.median(rates), "min": min(rates), "max": max(rates),
            "cpu_us_per_span": statistics.median(run["cpu_us_per_span"] for run in runs),
            "lost": sum(run["lost"] for run in runs),
            "sustained": all(run["sustained"] for run in runs), "runs": runs}


def compare(binary: Path, middles: dict[str, Any], sink: Sink, rate: int, seconds: float,
            rounds: int) -> dict[str, Any]:
    """Both middles at `rate`, alternating which goes first; per middle its summary, and the
    gateway / collector ratio of the medians with the per-round ratios' range."""
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in middles}
    names = list(middles)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            middle = middles[name]
            runs[name].append(offer(binary, middle.address, middle.pid, sink, rate, seconds))
    result: dict[str, Any] = {name: _summary(found) for name, found in runs.items()}
    per_round = [g["spans_per_cpu_s"] / c["spans_per_cpu_s"]
                 for g, c in zip(runs[GATEWAY], runs[COLLECTOR]) if c["spans_per_cpu_s"]]
    result["ratio"] = result[GATEWAY]["spans_per_cpu_s"] / result[COLLECTOR]["spans_per_cpu_s"]
    result["ratio_min"], result["ratio_max"] = min(per_round), max(per_round)
    result["sustained"] = result[GATEWAY]["sustained"] and result[COLLECTOR]["sustained"]
    for name, key in ((PLAIN, "plain_ratio"), (BASELINE, "baseline_ratio")):
        if name in result:
            result[key] = result[name]["spans_per_cpu_s"] / result[COLLECTOR]["spans_per_cpu_s"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", help="write results to this path")
    parser.add_argument("--rates", default="2000,4800", help="the fixed offered rates, spans/s")
    parser.add_argument("--rounds", type=int, help="rounds per rate (default 2 quick, 4 full)")
    parser.add_argument("--seconds", type=float, help="seconds per run (default 5 quick, 10)")
    parser.add_argument("--no-ladder", action="store_true", help="only the fixed rates")
    parser.add_argument("--profile", action="store_true", help="profile the gateway (py-spy)")
    parser.add_argument("--plain", action="store_true", help="add a plain grpcio pass-through")
    parser.add_argument("--baseline", type=Path, help="another checkout's gateway, side by side")
    args = parser.parse_args()
    rounds = args.rounds or (2 if args.quick else 4)
    seconds = args.seconds or (5.0 if args.quick else 10.0)
    core = max(os.sched_getaffinity(0))
    from tracescore.testing._collector import collector_binary

    binary, otelcol = _telemetrygen(), collector_binary()
    results: dict[str, Any] = {"environment": environment(), "quick": args.quick,
                               "workers": WORKERS, "spans_per_trace": SPANS_PER_TRACE,
                               "rounds": rounds, "seconds": seconds, "rates": {}}
    with tempfile.TemporaryDirectory(prefix="bench-vs-collector-") as tmp:
        sink = Sink()
        middles: dict[str, Any] = {}
        try:
            middles[GATEWAY] = GatewayUnderTest(sink, Path(tmp), core)
            middles[COLLECTOR] = Collector(otelcol, sink, Path(tmp), core)
            if args.plain:
                middles[PLAIN] = PlainPassThrough(sink, core)
            if args.baseline:
                middles[BASELINE] = GatewayUnderTest(sink, Path(tmp), core,
                                                     checkout=args.baseline.resolve())
            for middle in middles.values():  # connections up, code paths warm
                offer(binary, middle.address, middle.pid, sink, 2000, 1.0)
            for rate in (int(r) for r in args.rates.split(",")):
                results["rates"][str(rate)] = compare(binary, middles, sink, rate, seconds,
                                                      rounds)
            highest = None
            for rate in () if args.no_ladder else LADDER:
                found = compare(binary, middles, sink, rate, seconds, max(1, rounds // 2))
                results["rates"][str(rate)] = found
                if not found["sustained"]:
                    break
                highest = rate
            if highest is not None:
                results["highest_sustained"] = {"rate": highest,
                                                **results["rates"][str(highest)]}
            if args.profile:
                first = int(args.rates.split(",")[0])
                results["profile"] = profile(binary, middles[GATEWAY], sink, first, seconds)
        finally:
            for middle in middles.values():
                middle.close()
            sink.close()
    rows = []
    for rate, found in results["rates"].items():
        gw, col = found[GATEWAY], found[COLLECTOR]
        rows.append([int(rate), gw["spans_per_cpu_s"], col["spans_per_cpu_s"],
                     gw["cpu_us_per_span"], col["cpu_us_per_span"], found["ratio"],
                     f"{found['ratio_min']:.2f}-{found['ratio_max']:.2f}",
                     f"{gw['lost']}/{col['lost']}", "yes" if found["sustained"] else "no"])
    print_table(rows, ["offered spans/s", "gateway spans/CPU-s", "otelcol spans/CPU-s",
                       "gateway CPU us/span", "otelcol CPU us/span", "gateway / otelcol",
                       "rounds' range", "lost gw/otelcol", "both sustain"],
                title=f"Pass-through per CPU-second, middle pinned to one core (telemetrygen "
                      f"{WORKERS} workers, {SPANS_PER_TRACE}-span traces, {seconds:g} s runs, "
                      f"{rounds} alternating rounds at the fixed rates)")
    plain = [[int(rate), found[PLAIN]["spans_per_cpu_s"], found["plain_ratio"]]
             for rate, found in results["rates"].items() if PLAIN in found]
    if plain:
        print_table(plain, ["offered spans/s", "plain grpcio spans/CPU-s", "plain / otelcol"],
                    title="The transport alone: a plain Python pass-through on grpcio")
    base = [[int(rate), found[BASELINE]["spans_per_cpu_s"], found["baseline_ratio"],
             found[GATEWAY]["spans_per_cpu_s"] / found[BASELINE]["spans_per_cpu_s"]]
            for rate, found in results["rates"].items() if BASELINE in found]
    if base:
        print_table(base, ["offered spans/s", "baseline spans/CPU-s", "baseline / otelcol",
                           "this checkout / baseline"],
                    title=f"The gateway of {args.baseline}, in the same rounds")
    highest = results.get("highest_sustained")
    print(f"highest offered rate both sustain: {highest['rate'] if highest else 'none tried'}")
    if results.get("profile"):
        shares = dict(results["profile"])
        samples = shares.pop("samples")
        print_table([[part, share] for part, share in shares.items()],
                    ["part of the gateway's path", "% of GIL-holding samples"],
                    title=f"Where the gateway's Python time goes (py-spy --gil, all threads, "
                          f"{samples} samples)")
    write_json(args.json, results)


if __name__ == "__main__":
    main()
