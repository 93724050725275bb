"""Shared timing helpers for the benchmark scripts (stdlib only, so any venv can import it).

Usage from a script in ``benchmarks/`` (its directory is on ``sys.path`` when run as a file)::

    from _common import interleaved, percentiles, rss_mb, write_json, print_table

    medians = interleaved({"bare": bare, "traced": traced}, rounds=7, n=20_000)
    # {"bare": 85.1, "traced": 2950.4}   (median ns per call over the rounds)

Sync callables are timed in a plain loop; coroutine functions are awaited in a loop inside one
event loop per round, so the loop's own start-up cost is not counted per call.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import inspect
import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = [
    "RssSampler",
    "atimeit_ns",
    "environment",
    "interleaved",
    "percentiles",
    "print_table",
    "read_json",
    "rss_mb",
    "timeit_ns",
    "write_json",
]


_CLOCKS: dict[str, Callable[[], int]] = {
    "wall": time.perf_counter_ns,
    "cpu": time.thread_time_ns,  # this thread's CPU time: a busy host's other work is not counted
    # the whole process's CPU time, every thread: work moved to a background thread still counts
    "process": time.process_time_ns,
}


def timeit_ns(fn: Callable[[], Any], n: int, clock: str = "wall",
              settle: Callable[[], Any] | None = None) -> float:
    """Mean nanoseconds per call of ``fn()`` over ``n`` calls (``clock``: "wall", "cpu" or
    "process"); ``settle()`` runs inside the timed window after the calls (e.g. a flush, so work
    a background thread still owes is counted)."""
    perf = _CLOCKS[clock]
    rng = range(n)
    start = perf()
    for _ in rng:
        fn()
    if settle is not None:
        settle()
    return (perf() - start) / n


def atimeit_ns(fn: Callable[[], Awaitable[Any]], n: int, clock: str = "wall",
               settle: Callable[[], Any] | None = None) -> float:
    """Mean nanoseconds per ``await fn()`` over ``n`` awaits, inside a fresh event loop."""

    async def _run() -> float:
        perf = _CLOCKS[clock]
        rng = range(n)
        start = perf()
        for _ in rng:
            await fn()
        if settle is not None:
            settle()
        return (perf() - start) / n

    return asyncio.run(_run())


def _measure(fn: Callable[..., Any], n: int, clock: str = "wall",
             settle: Callable[[], Any] | None = None) -> float:
    if inspect.iscoroutinefunction(fn):
        return atimeit_ns(fn, n, clock, settle)
    return timeit_ns(fn, n, clock, settle)


def interleaved(
    cases: Mapping[str, Callable[[], Any]],
    rounds: int = 7,
    n: int = 10_000,
    *,
    warmup: int | None = None,
    samples: dict[str, list[float]] | None = None,
    clock: str = "wall",
    settle: Callable[[], Any] | None = None,
) -> dict[str, float]:
    """Median ns/call per case, with the cases run in turn in every round.

    Interleaving spreads machine noise (other processes, frequency changes) evenly over the
    cases, so their ratios are fair even on a busy host. Each case is warmed up first
    (``warmup`` calls, default ``n // 10``). If ``samples`` is given, the per-round figures
    are appended to it by case name. ``clock="cpu"`` times this thread's CPU time instead of
    wall time (steadier on a shared host; excludes work done by background threads);
    ``clock="process"`` the whole process's CPU time, background threads included, with
    ``settle()`` (e.g. a flush) run inside every timed window.
    """
    warm = max(1, n // 10) if warmup is None else warmup
    for fn in cases.values():
        _measure(fn, warm, clock, settle)
    per_case: dict[str, list[float]] = {name: [] for name in cases}
    names = list(cases)
    for r in range(rounds):
        # Rotate the start so no case always runs right after a gc or a noisy neighbour.
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            gc.collect()
            per_case[name].append(_measure(cases[name], n, clock, settle))
    if samples is not None:
        for name, values in per_case.items():
            samples.setdefault(name, []).extend(values)
    return {name: statistics.median(values) for name, values in per_case.items()}


def percentiles(samples: Iterable[float], ps: Sequence[float] = (50, 99)) -> list[float]:
    """Percentiles (nearest-rank on sorted data, linear interpolation) of ``samples``."""
    data = sorted(samples)
    if not data:
        return [math.nan for _ in ps]
    out = []
    for p in ps:
        k = (len(data) - 1) * (p / 100.0)
        lo, hi = math.floor(k), math.ceil(k)
        out.append(data[lo] + (data[hi] - data[lo]) * (k - lo))
    return out


def rss_mb(pid: int | None = None) -> float:
    """Current resident set size of this process (or `pid`) in MiB (Linux /proc, else peak RSS
    of this process)."""
    try:
        with open(f"/proc/{pid or 'self'}/statm", encoding="ascii") as fh:
            pages = int(fh.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / (1024 * 1024)
    except (OSError, ValueError, IndexError):
        if pid is not None:
            raise
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak / 1024 if sys.platform != "darwin" else peak / (1024 * 1024)


class RssSampler:
    """Samples ``rss_mb()`` every ``interval`` seconds in a daemon thread.

    ``with RssSampler(1.0) as s: ...`` then ``s.samples`` is a list of ``(elapsed_s, mb)``.
    ``also()`` returns more pids whose RSS counts in each sample (e.g. a helper process).
    """

    def __init__(self, interval: float = 1.0, also: Callable[[], list[int]] | None = None) -> None:
        import threading

        self.also = also or list
        self.interval = interval
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)
        self._t0 = 0.0

    def _run(self) -> None:
        while True:
            self.samples.append((time.monotonic() - self._t0, self._total()))
            if self._stop.wait(self.interval):
                break

    def _total(self) -> float:
        total = rss_mb()
        for pid in self.also():
            with contextlib.suppress(OSError, ValueError, IndexError):  # the helper just exited
                total += rss_mb(pid)
        return total

    def __enter__(self) -> Self:
        self._t0 = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append((time.monotonic() - self._t0, self._total()))


def environment() -> dict[str, Any]:
    """A few facts about the machine and interpreter, to store next to results."""
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def write_json(path: str | os.PathLike[str] | None, data: Any) -> None:
    """Write ``data`` as indented JSON to ``path`` (parents created); no-op when path is None."""
    if path is None:
        return
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(p.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n", "utf-8")
    tmp.replace(p)


def read_json(path: str | os.PathLike[str]) -> Any:
    return json.loads(Path(path).read_text("utf-8"))


def print_table(
    rows: Sequence[Sequence[Any]], headers: Sequence[str], *, title: str | None = None
) -> None:
    """Print a plain aligned table (floats shown with 2 decimals unless >= 1000)."""

    def fmt(v: Any) -> str:
        if isinstance(v, float):
            if math.isnan(v):
                return "-"
            return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.2f}"
        return "-" if v is None else str(v)

    cells = [[fmt(v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, c in enumerate(row):
            widths[i] = max(widths[i], len(c))
    if title:
        print(f"\n{title}")
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths)))
    print("  ".join("-" * w for w in widths))
    for values, row in zip(rows, cells):
        # Numbers right-aligned, text left-aligned.
        line = "  ".join(
            c.rjust(w) if isinstance(v, (int, float)) else c.ljust(w)
            for v, c, w in zip(values, row, widths)
        )
        print(line.rstrip())
    sys.stdout.flush()
