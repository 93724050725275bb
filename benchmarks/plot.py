"""Draw benchmarks/results/summary.json as one PNG (needs matplotlib; run_all.py arranges that).

    python benchmarks/plot.py [SUMMARY_JSON] [OUT_PNG]

Panels: agent decorator cost as a multiple of a raw OpenTelemetry span (tracescore and peer
SDKs, sync and async); online scoring cost added per agent call; agent latency with scoring
off and on; scoring throughput as a share of the ideal (and RSS growth under overload);
content similarity pairs per second; import time. A panel whose benchmark did not run says so instead of a chart.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _common import read_json

DEFAULT_SUMMARY = HERE / "results" / "summary.json"
DEFAULT_PNG = HERE.parent / "docs" / "assets" / "overview.png"
OURS = "#1f77b4"
PEER = "#b0b0b0"
OTHER = "#aec7e8"
FLOOR = "#2ca02c"


def _get(data: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def _missing(ax: Any, title: str) -> None:
    ax.set_title(title, fontsize=10)
    ax.text(0.5, 0.5, "not measured in this run", ha="center", va="center", color="gray")
    ax.set_axis_off()


def _label_bars(ax: Any, bars: Any, values: list[float], fmt: str) -> None:
    """Write each bar's value (`fmt`, e.g. "{:.2f}") on top of it."""
    for bar, v in zip(bars, values):
        x = bar.get_x() + bar.get_width() / 2
        ax.text(x, v, fmt.format(v), ha="center", va="bottom", fontsize=7)


def _paired_bars(ax: Any, series: int, values: list[float], fmt: str, count: int = 2,
                 **style: Any) -> None:
    """Series `series` of a `count`-bar group per x position, labelled with its values."""
    width = 0.76 / count
    xs = [x + (series - (count - 1) / 2) * width for x in range(len(values))]
    bars = ax.bar(xs, values, width, edgecolor="black", linewidth=0.5, **style)
    _label_bars(ax, bars, values, fmt)


def _overhead(ax: Any, peers: dict[str, Any] | None) -> None:
    title = ("Agent decorator process CPU per call / same-attribute span (Batch)\n"
             "(content capture on; lower is better)")
    sdks = _get(peers, "sdks") or {}
    if not sdks:
        _missing(ax, title)
        return
    names = list(sdks)
    colors = [OURS if n.startswith("tracescore") else PEER for n in names]
    for i, flavour in enumerate(("sync", "async")):
        values = [_get(sdks[n], flavour, "cpu", "ratio_to_raw_batch") or 0.0 for n in names]
        _paired_bars(ax, i, values, "{:.2f}", color=colors, hatch="" if i == 0 else "//")
    ax.axhline(1.0, color=FLOOR, linewidth=1, label="hand-written span = 1")
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, fontsize=8)
    ax.set_ylabel("x hand-written span (plain: sync, hatched: async)", fontsize=8)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="upper left")


def _online_cost(ax: Any, online: dict[str, Any] | None) -> None:
    title = "Online scoring: cost added per agent call (us)"
    cases = [
        ("unsampled", _get(online, "added_unsampled_us"), 1.0),
        ("sampled\nhand-off", _get(online, "added_sampled_handoff_us"), 15.0),
    ]
    if all(v is None for _, v, _ in cases):
        _missing(ax, title)
        return
    labels = [f"{name}\n(target < {target:g} us)" for name, _, target in cases]
    values = [v or 0.0 for _, v, _ in cases]
    bars = ax.bar(labels, values, color=OURS, edgecolor="black", linewidth=0.5)
    for i, (_, _, target) in enumerate(cases):
        ax.hlines(target, i - 0.4, i + 0.4, colors="red", linestyles="--", linewidth=1)
    measured = [(bar, v) for bar, (_, v, _) in zip(bars, cases) if v is not None]
    _label_bars(ax, [bar for bar, _ in measured], [v for _, v in measured], "{:.1f}")
    ax.set_ylabel("us per call over tracing alone", fontsize=8)
    ax.set_title(title, fontsize=10)


def _throughput(ax: Any, online: dict[str, Any] | None) -> None:
    title = "Scoring throughput, % of ideal\n(concurrency / (judge calls x latency))"
    runs = _get(online, "throughput") or {}
    if not runs:
        _missing(ax, title)
        return
    labels = list(runs)
    values = [100 * (_get(runs[k], "ratio") or 0.0) for k in labels]
    bars = ax.bar(labels, values, color=OURS, edgecolor="black", linewidth=0.5)
    _label_bars(ax, bars, values, "{:.0f}%")
    ax.axhline(90, color="red", linestyle="--", linewidth=1, label="target 90%")
    growth = _get(online, "memory_overload", "growth_mb")
    if growth is not None:
        secs = _get(online, "memory_overload", "seconds") or 0
        ax.set_xlabel(
            f"RSS growth under 10x overload for {secs:.0f} s: {growth:.1f} MB (target < 50 MB)",
            fontsize=8,
        )
    ax.set_ylim(0, 115)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="upper right")


def _latency(ax: Any, online: dict[str, Any] | None) -> None:
    title = "Agent latency (2 ms agent), scoring off vs on\nwith a 2 s judge (ms; target: equal by default)"
    runs = _get(online, "agent_latency_ms") or {}
    if not runs:
        _missing(ax, title)
        return
    colors = [PEER, OURS, OTHER]  # off, default, the other isolation mode
    for i, name in enumerate(runs):
        values = [_get(runs[name], p) or 0.0 for p in ("p50", "p99")]
        _paired_bars(ax, i, values, "{:.2f}", count=len(runs), label=name,
                     color=colors[min(i, len(colors) - 1)])
    ax.set_xticks(range(2))
    ax.set_xticklabels(["p50", "p99"])
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="upper left")


def _similarity(ax: Any, similarity: dict[str, Any] | None) -> None:
    title = "Content similarity scorer, pairs/s\n(default Dice vs rapidfuzz ratio; target >= 1/3)"
    sizes = _get(similarity, "levels", "scorer") or {}
    if not sizes:
        _missing(ax, title)
        return
    labels = list(sizes)
    for i, algorithm in enumerate(("dice", "ratio")):
        values = [_get(sizes[size], algorithm, "pairs_per_s") or 0.0 for size in labels]
        _paired_bars(ax, i, values, "{:,.0f}", label=algorithm, color=OURS if i == 0 else PEER)
    ax.set_yscale("log")
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels([f"{size} texts" for size in labels], fontsize=8)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="upper right")


def _imports(ax: Any, imports: dict[str, Any] | None) -> None:
    title = "Import time, fresh interpreter (ms, median)"
    cases = _get(imports, "cases") or {}
    if not cases:
        _missing(ax, title)
        return
    labels = list(cases)
    values = [_get(cases[k], "median_ms") or 0.0 for k in labels]
    colors = [OURS if k.startswith("tracescore") else PEER for k in labels]
    bars = ax.barh(labels, values, color=colors, edgecolor="black", linewidth=0.5)
    for bar, v in zip(bars, values):
        ax.text(v, bar.get_y() + bar.get_height() / 2, f" {v:.0f}", va="center", fontsize=7)
    ax.invert_yaxis()
    ax.tick_params(axis="y", labelsize=7)
    ax.set_xlabel("ms", fontsize=8)
    ax.set_title(title, fontsize=10)


def plot(summary: dict[str, Any], out: Path) -> Path:
    """Render `summary` (as written by run_all.py) to `out`; returns the path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = summary.get("results", {})
    fig, axes = plt.subplots(2, 3, figsize=(17, 9))
    _overhead(axes[0][0], results.get("peers"))
    _online_cost(axes[0][1], results.get("online"))
    _latency(axes[0][2], results.get("online"))
    _throughput(axes[1][0], results.get("online"))
    _similarity(axes[1][1], results.get("similarity"))
    _imports(axes[1][2], results.get("import"))
    env = summary.get("environment", {})
    fig.suptitle(
        f"tracescore benchmarks ({summary.get('mode', '?')} run, {env.get('time_utc', '')}, "
        f"Python {env.get('python', '?')}, {env.get('cpus', '?')} CPUs)",
        fontsize=11,
    )
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    summary_path = Path(args[0]) if args else DEFAULT_SUMMARY
    out = Path(args[1]) if len(args) > 1 else DEFAULT_PNG
    print(f"wrote {plot(read_json(summary_path), out)}")


if __name__ == "__main__":
    main()
