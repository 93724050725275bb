"""Run every benchmark, collect their JSON, write a summary and a plot, print one table.

    python benchmarks/run_all.py            # quick mode: a few minutes (`make bench`)
    python benchmarks/run_all.py --full     # full rounds and the 60 s memory run
    python benchmarks/run_all.py --only peers,import

Each benchmark runs as a subprocess with `--json benchmarks/results/<name>.json` (and `--quick`
unless --full); its own tables stream to the terminal. Then `results/summary.json` gathers all
figures plus a headline table (figure, target, verdict), and `docs/assets/overview.png` plots them
(matplotlib from this interpreter, else from `.bench-venvs/plot`, created on first use).
A benchmark that fails is reported and the others still run; the exit code is then 1.
Missed targets do not fail the run: they are figures to read, not assertions.
"""

from __future__ import annotations

import argparse
import operator
import os
import subprocess
import sys
import time
import venv
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from _common import environment, print_table, read_json, write_json

RESULTS = HERE / "results"
DOCS_PNG = ROOT / "docs" / "assets" / "overview.png"  # the plot the docs and README show
LABELS = {
    "tracescore": "tracescore `@agent`, `configure()`",
    "tracescore-own-batch": "tracescore `@agent`, own `BatchSpanProcessor`",
    "traceloop": "traceloop-sdk `@agent`",
    "langfuse": "langfuse `@observe`",
    "openinference": "openinference `tracer.agent`",
    "logfire": "logfire `@instrument`",
}
PLOT_VENV = ROOT / ".bench-venvs" / "plot"
PLOT_REQUIREMENTS = ["matplotlib==3.11.2"]

# name -> script; run in this order (the CPU-heavy online run last but one).
BENCHMARKS: dict[str, str] = {
    "decorators": "bench_decorators.py",
    "peers": "bench_peers.py",
    "similarity": "bench_similarity.py",
    "online": "bench_online.py",
    "import": "bench_import.py",
    "recognise": "bench_recognise.py",
    "export": "bench_export.py",
    "gateway": "bench_gateway.py",
    "vs_collector": "bench_vs_collector.py",
    "redact": "bench_redact.py",
    "offline_judges": "bench_offline_judges.py",
    "scopes": "bench_scopes.py",
}


@dataclass(frozen=True)
class Headline:
    """One row of the summary table: a figure at `path` in a benchmark's JSON, and its target."""

    benchmark: str
    label: str
    path: tuple[str, ...]
    unit: str
    compare: str | None = None  # "<=", "<", ">="
    target: float | None = None
    scale: float = 1.0
    divide_by: tuple[str, ...] | None = None  # report value / this figure (a ratio)


_OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    "<": operator.lt,
    ">=": operator.ge,
}

_LATENCY_RUNS = ("scoring off", "scoring on (2 s judge)")  # keys in online.json (on: default)

HEADLINES: list[Headline] = [
    *(
        Headline(
            "decorators",
            f"@agent {flavour}, {processor} / same-attribute span, same processor, process CPU",
            (flavour, "ratios", f"tracescore | {processor}", "cpu"),
            "x",
            "<=",
            1.0,
        )
        for flavour in ("sync", "async")
        for processor in ("simple", "batch", "configure(batch=False)", "configure(batch=True)")
    ),
    *(  # what switching from your own SDK processor to configure() costs: decorator + guard
        Headline(
            "decorators",
            f"@agent {flavour}, configure(batch={batch}) / same-attribute span under your own "
            f"{own}, process CPU",
            (flavour, "ratios", f"tracescore | configure(batch={batch})", "cpu_vs_own_setup"),
            "x",
        )
        for flavour in ("sync", "async")
        for batch, own in (("False", "SimpleSpanProcessor"), ("True", "BatchSpanProcessor"))
    ),
    *(
        Headline(
            "similarity",
            f"dice / rapidfuzz ratio, {size_label} (scorer)",
            ("levels", "scorer", size, "dice", "vs_ratio"),
            "x",
            ">=",
            1 / 3,
        )
        for size, size_label in (("short", "short"), ("2KB", "2 KB"))
    ),
    Headline("online", "unsampled: added per call", ("added_unsampled_us",), "us", "<", 1.0),
    Headline(
        "online", "sampled: hand-off per call", ("added_sampled_handoff_us",), "us", "<", 15.0
    ),
    *(
        Headline("online", f"agent {p}, {run}", ("agent_latency_ms", run, p), "ms")
        for p in ("p50", "p99")
        for run in _LATENCY_RUNS
    ),
    *(
        Headline(
            "online",
            f"agent {p}, scoring on / off",
            ("agent_latency_ms", _LATENCY_RUNS[1], p),
            "x",
            "<=",
            1.1,
            divide_by=("agent_latency_ms", _LATENCY_RUNS[0], p),
        )
        for p in ("p50", "p99")
    ),
    Headline(  # for comparison: the judged scorer in the agent's process
        "online",
        "agent p99, isolation=thread / off",
        ("agent_latency_ms", "scoring on, isolation=thread", "p99"),
        "x",
        divide_by=("agent_latency_ms", _LATENCY_RUNS[0], "p99"),
    ),
    *(
        Headline(
            "online",
            f"throughput, {judge}",
            ("throughput", key, "ratio"),
            "% ideal",
            ">=",
            90.0,
            100.0,
        )
        for key, judge in (
            ("litellm_stub", "litellm stub judge"),
            ("in_process", "in-process judge"),
        )
    ),
    Headline("online", "overload, slow judge: judge requests per landed score (ideal 3)",
             ("overload_requests_per_landed",), "requests", "<=", 3.3),
    Headline(
        "online", "RSS growth, 10x overload", ("memory_overload", "growth_mb"), "MB", "<", 50.0
    ),
    Headline("import", "import tracescore", ("cases", "tracescore", "median_ms"), "ms"),
    Headline("export", "export thread: span cap + split / SDK encode, 512 spans",
             ("export_thread", "typical", "ratio"), "x", "<=", 1.2),
    Headline("export", "agent thread: batch=False / SDK SimpleSpanProcessor",
             ("agent_thread", "no batch", "ratio"), "x", "<", 1.0),
    Headline("recognise", "agent spans recognised, slowest convention",
             ("slowest_agent_spans_per_s",), "spans/s"),
    Headline("recognise", "non-agent span rejected, slowest", ("slowest_reject_ns",), "us",
             scale=1e-3),
    Headline("gateway", "gateway pass-through, spans/s (one core)",
             ("pass_through", "tracescore serve", "spans_per_s"), "spans/s"),
    Headline("gateway", "gateway / real collector pass-through",
             ("pass_through", "gateway_over_otelcol (real collector)"), "x", ">=", 0.5),
    Headline("gateway", "gateway added p99, span not held (journal sync=full)",
             ("pass_through", "tracescore serve", "added_p99_ms"), "ms", "<", 5.0),
    Headline("gateway", "gateway added p99, span not held (journal sync=normal)",
             ("pass_through", "tracescore serve, journal sync=normal", "added_p99_ms"), "ms",
             "<", 5.0),
    *(
        Headline("vs_collector", f"gateway / collector spans per CPU-second, {rate} spans/s "
                 "offered (telemetrygen)", ("rates", rate, "ratio"), "x", ">=", 1.0)
        for rate in ("2000", "4800")
    ),
    Headline("vs_collector", "gateway / collector spans per CPU-second, highest rate both "
             "sustain", ("highest_sustained", "ratio"), "x", ">=", 1.0),
    Headline("vs_collector", "highest offered rate both sustain without loss",
             ("highest_sustained", "rate"), "spans/s"),
    *(
        Headline("gateway", f"gateway scoring throughput, {n}", ("scoring", n, "ratio"),
                 "% ideal", ">=", 90.0)
        for n in ("1 replica", "2 replicas")
    ),
    Headline("gateway", "gateway RSS growth, 10x overload", ("memory", "growth_mb"), "MB", "<",
             100.0),
    *(
        Headline("similarity", f"code scorer {name} / content similarity, short, runs/s",
                 ("code_scorers", "short", name), "x",
                 divide_by=("code_scorers", "short", "content-similarity"))
        for name in ("textual-difference", "keyword-coverage", "tool-call-accuracy",
                     "completeness", "tone-consistency")
    ),
    *(
        Headline("offline_judges", f"offline {name} / offline answer relevancy, runs/s",
                 ("vs_answer_relevancy", name), "x")
        for name in ("toxicity", "llm-tool-call-accuracy")
    ),
    *(
        Headline("scopes", f"agent call, {case} / call scorer only, rate 1, process CPU",
                 ("cpu_per_call", "rate 1", "cases", case, "process_ratio"), "x")
        for case in ("b: + run scorer", "c: + conversation scorer")
    ),
    Headline("scopes", "open conversation (3 turns), tracemalloc bytes, 10x load",
             ("memory", "10x, default bounds", "traced_bytes_per_offered"), "bytes"),
    Headline("import", "import opentelemetry.trace", ("cases", "otel api", "median_ms"), "ms"),
    Headline(
        "import",
        "import asyncio, opentelemetry.sdk.trace",
        ("cases", "otel sdk + asyncio", "median_ms"),
        "ms",
    ),
    Headline(
        "import",
        "from tracescore import agent, configure",
        ("cases", "tracescore agent+configure", "median_ms"),
        "ms",
    ),
]


def _get(data: Any, path: Sequence[str]) -> Any:
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def _peer_headlines(peers: dict[str, Any]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    sdks = peers.get("sdks", {})
    target = peers.get("target_advantage", 1.5)
    for flavour in ("sync", "async"):
        for sdk, res in sdks.items():
            rows.append(
                {
                    "benchmark": "peers",
                    "label": f"{sdk} {res.get('version', '')} {flavour} / same-attribute span "
                             "(Batch), process CPU",
                    "value": _get(res, (flavour, "cpu", "ratio_to_raw_batch")),
                    "unit": "x",
                    "target": None,
                    "ok": None,
                }
            )
        for key, setup in ((flavour, "configure()"), (f"{flavour} own batch", "own Batch")):
            check = _get(peers, ("checks", key))
            if not check:
                continue
            rows.append(
                {
                    "benchmark": "peers",
                    "label": f"fastest peer ({check['fastest_peer']}) / tracescore {flavour} "
                             f"({setup}), process CPU",
                    "value": check["fastest_peer_over_tracescore"],
                    "unit": "x",
                    "target": f">= {target}",
                    "ok": bool(check["within_target"]),
                }
            )
    return rows


def _headline(h: Headline, data: dict[str, Any]) -> dict[str, Any]:
    value = _get(data, h.path)
    value = float(value) * h.scale if isinstance(value, (int, float)) else None
    if h.divide_by is not None and value is not None:
        base = _get(data, h.divide_by)
        value = value / base if isinstance(base, (int, float)) and base else None
    ok = None
    if h.compare and h.target is not None and value is not None:
        ok = _OPS[h.compare](value, h.target)
    target = f"{h.compare} {h.target:.3g}" if h.compare and h.target is not None else None
    return {
        "benchmark": h.benchmark,
        "label": h.label,
        "value": value,
        "unit": h.unit,
        "target": target,
        "ok": ok,
    }


def headlines(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Headline rows (figure, unit, target, verdict) for the benchmarks that produced JSON."""
    rows: list[dict[str, Any]] = []
    for name in BENCHMARKS:
        if name not in results:
            continue
        if name == "peers":
            rows.extend(_peer_headlines(results[name]))
        else:
            rows.extend(_headline(h, results[name]) for h in HEADLINES if h.benchmark == name)
    return rows


def markdown(summary: dict[str, Any]) -> str:
    """The headline table (and the peer comparison) as Markdown, for the README's Performance section."""
    env = summary["environment"]
    lines = [
        (
            f"_{summary['mode']} run, {env['time_utc']}, Python {env['python']}, "
            f"{env['cpus']} CPUs ({env['platform']})_"
        ),
        "",
        "| benchmark | figure | value | target | verdict |",
        "| --- | --- | ---: | --- | --- |",
    ]
    for h in summary["headlines"]:
        verdict = {True: "OK", False: "missed", None: ""}[h["ok"]]
        target = (h["target"] or "").replace("<", "&lt;").replace(">", "&gt;")
        lines.append(
            f"| {h['benchmark']} | {h['label']} | {_fmt(h['value'], h['unit'])} | {target} "
            f"| {verdict} |"
        )
    sdks = _get(summary, ("results", "peers", "sdks")) or {}
    if sdks:
        lines += [
            "",
            (
                "| SDK (agent decorator, content capture on) | span processor | sync CPU µs "
                "| same-attr span, Batch | sync / span | async CPU µs | same-attr span, Batch "
                "| async / span |"
            ),
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for sdk, res in sdks.items():
            s, a = res["sync"]["cpu"], res["async"]["cpu"]
            lines.append(
                f"| {LABELS.get(sdk, sdk)} {res.get('version', '')} | {res.get('processor', '')} "
                f"| {s['sdk_ns'] / 1000:.1f} | {s['raw_batch_ns'] / 1000:.1f} "
                f"| {s['ratio_to_raw_batch']:.2f}x | {a['sdk_ns'] / 1000:.1f} "
                f"| {a['raw_batch_ns'] / 1000:.1f} | {a['ratio_to_raw_batch']:.2f}x |"
            )
    return "\n".join(lines) + "\n"


def _run(name: str, script: Path, full: bool, out: Path) -> dict[str, Any]:
    cmd = [sys.executable, str(script), "--json", str(out)]
    if not full:
        cmd.append("--quick")
    print(
        f"\n===== {name}: {' '.join(Path(c).name if c == str(script) else c for c in cmd)}",
        flush=True,
    )
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    started = time.monotonic()
    if out.exists():
        out.unlink()
    try:
        code = subprocess.run(cmd, check=False, env=env, cwd=ROOT, timeout=1800).returncode
    except subprocess.TimeoutExpired:
        code = -1
    seconds = time.monotonic() - started
    ok = code == 0 and out.exists()
    return {"script": script.name, "exit_code": code, "seconds": round(seconds, 1), "ok": ok}


def _plot_python() -> Path | None:
    """An interpreter with matplotlib: this one, else `.bench-venvs/plot` (made on demand)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        pass
    else:
        return Path(sys.executable)
    python = PLOT_VENV / "bin" / "python"
    probe = [str(python), "-c", "import matplotlib"]
    if python.exists() and subprocess.run(probe, check=False, capture_output=True).returncode == 0:
        return python
    print(f"[plot] installing {' '.join(PLOT_REQUIREMENTS)} into {PLOT_VENV.relative_to(ROOT)}")
    try:
        if not python.exists():
            venv.EnvBuilder(with_pip=True, clear=True).create(PLOT_VENV)
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", *PLOT_REQUIREMENTS],
            check=True,
            capture_output=True,
            timeout=900,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        print(f"[plot] matplotlib unavailable ({exc}); no PNG written", file=sys.stderr)
        return None
    return python


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "x":
        return f"{value:.2f}x"
    if unit in ("us", "ms", "MB"):
        return f"{value:,.2f} {unit}"
    return f"{value:.1f} {unit}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--full", action="store_true", help="full rounds, 60 s memory run")
    parser.add_argument(
        "--only", default=None, help=f"comma-separated subset of {list(BENCHMARKS)}"
    )
    parser.add_argument("--out-dir", type=Path, default=RESULTS)
    parser.add_argument("--no-plot", action="store_true")
    args = parser.parse_args(argv)
    selected = list(BENCHMARKS)
    if args.only:
        selected = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = sorted(set(selected) - set(BENCHMARKS))
        if unknown:
            parser.error(f"unknown benchmark(s): {', '.join(unknown)}")

    out_dir: Path = args.out_dir.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    runs: dict[str, Any] = {}
    results: dict[str, Any] = {}
    for name in selected:
        script = HERE / BENCHMARKS[name]
        if not script.exists():
            runs[name] = {
                "script": script.name,
                "ok": False,
                "exit_code": None,
                "error": "script not found",
            }
            continue
        out = out_dir / f"{name}.json"
        runs[name] = _run(name, script, args.full, out)
        if runs[name]["ok"]:
            results[name] = read_json(out)

    summary: dict[str, Any] = {
        "environment": environment(),
        "mode": "full" if args.full else "quick",
        "runs": runs,
        "headlines": headlines(results),
        "results": results,
    }
    summary["elapsed_s"] = round(time.monotonic() - started, 1)
    summary_path = out_dir / "summary.json"
    write_json(summary_path, summary)

    (out_dir / "summary.md").write_text(markdown(summary), "utf-8")

    png = DOCS_PNG if out_dir == RESULTS.resolve() else out_dir / "overview.png"
    if not args.no_plot and results:
        python = _plot_python()
        if python is not None:
            proc = subprocess.run(
                [str(python), str(HERE / "plot.py"), str(summary_path), str(png)],
                check=False,
                capture_output=True,
                text=True,
            )
            if proc.returncode != 0:
                print(f"[plot] failed: {proc.stderr.strip().splitlines()[-1:]}", file=sys.stderr)

    rows = []
    for h in summary["headlines"]:
        verdict = {True: "OK", False: "MISSED", None: ""}[h["ok"]]
        rows.append(
            [h["benchmark"], h["label"], _fmt(h["value"], h["unit"]), h["target"] or "", verdict]
        )
    print_table(
        rows,
        ["benchmark", "figure", "value", "target", "verdict"],
        title=f"Summary ({summary['mode']} run, {summary['elapsed_s']:.0f} s)",
    )
    failed = [n for n, r in runs.items() if not r["ok"]]
    for name in failed:
        print(f"{name}: FAILED (exit code {runs[name].get('exit_code')})")
    print(
        f"\nwrote {summary_path.relative_to(ROOT) if summary_path.is_relative_to(ROOT) else summary_path}"
        + (f" and {png.name}" if png.exists() else "")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
