"""The run scope at the gateway: an agent span of a trace a run-scope scorer samples waits, with
the others of its trace, until no span of that trace has arrived for `runs.quiet_s`; then each
is scored, its run's root (an agent span with no agent span above it) by the run-scope scorers
too, with the `Run` read from every span of the trace that arrived.

Spans of a run arrive in any order and late (a sender's batching, a collector in between): the
root agent span usually comes last, and nothing says a trace is complete. So the run is a
`QuietTable` group keyed by trace id; every span of the trace the engine reads starts its quiet
period again. The agent spans stay journaled and held by the engine meanwhile (a restart offers
them again), within the table's bounds (`max_runs`, `max_bytes`, `max_age_s`): a run let go by
a bound is scored with what arrived, counted by reason (`stats`). Sampling is by trace id, so a
run is sampled as a whole; the rate limits and budgets of run-scope scorers are taken at the
root only, once per run. Flush and shutdown score what is held at once.

A run that may lack spans says why on its result (`tracescore.run.partial`): it began before
this gateway started (its earlier spans went to the instance before: a restart, a new replica),
a bound let it go early, or its trace was forgotten. A span that arrives for a run already
scored (a sender's late retry) is counted (`runs_late_spans`).
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tracescore._exceptions import ConfigurationError
from tracescore.online.core import (
    AGE,
    OVERFLOW,
    RANDOMNESS_MASK,
    Call,
    Group,
    OnlineScorer,
    QuietTable,
    ScoringCore,
)
from tracescore.online.intake import RunSource, TraceCollector, agent_above

RUN_KEYS = ("quiet_s", "max_runs", "max_bytes", "max_age_s")


@dataclass(frozen=True, slots=True)
class Arrival:
    """An agent span of a sampled run, held until the run is quiet."""

    key: tuple[int, int]  # (trace id, span id)
    parent: int | None  # its parent span id
    item: Any  # what the engine holds (journal row, one-span request)
    call: Any  # its `RecognisedCall`
    span: Any  # the protobuf span (filters read its attributes)


def run_bounds(options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The checked `runs:` settings (quiet_s 5, max_runs 10000, max_bytes 64 MiB,
    max_age_s 600)."""
    values = {"quiet_s": 5.0, "max_runs": 10_000, "max_bytes": 64 * 1024 * 1024,
              "max_age_s": 600.0, **dict(options or {})}
    unknown = sorted(set(values) - set(RUN_KEYS))
    if unknown:
        raise ConfigurationError(f"runs: unknown keys {unknown} (known: {', '.join(RUN_KEYS)})")
    for name in ("quiet_s", "max_age_s"):
        value = values[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 \
                or math.isnan(value):
            raise ConfigurationError(f"runs.{name} must be a number >= 0, got {value!r}")
    for name in ("max_runs", "max_bytes"):
        value = values[name]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigurationError(f"runs.{name} must be an integer >= 1, got {value!r}")
    return values


class RunScope:
    """Runs waiting for their quiet period, then scored through `core`; `choose(span, call,
    randomness, scope)`: the scorers of a scope that sample an agent span (the engine's);
    `started_ns`: when spans began arriving live (runs begun before may lack spans)."""

    def __init__(self, options: Mapping[str, Any] | None, traces: TraceCollector,
                 core: ScoringCore, choose: Callable[[Any, Any, int, str | None],
                                                     tuple[OnlineScorer, ...]],
                 started_ns: int | None = None) -> None:
        bounds = run_bounds(options)
        self._traces = traces
        self._core = core
        self._choose = choose
        self.table: QuietTable[Arrival] = QuietTable(
            quiet_s=bounds["quiet_s"], deliver=self._deliver, max_groups=bounds["max_runs"],
            max_bytes=bounds["max_bytes"], max_age_s=bounds["max_age_s"])
        self.held = 0  # agent spans waiting
        self.late_spans = 0  # spans of runs already scored
        self._lock = threading.Lock()
        self._started_ns = started_ns or 0  # 0: whole traces (rescore), none began before
        self._scored: OrderedDict[int, None] = OrderedDict()  # trace ids of recent runs
        self._max_scored = bounds["max_runs"]

    def arrive(self, arrival: Arrival, size: int) -> None:
        """An agent span of a run a run-scope scorer samples: it waits for the run's quiet."""
        with self._lock:
            self.held += 1
        self.table.arrive(arrival.key[0], arrival, size=size, ready=True)

    def touch(self, trace_id: int) -> None:
        """A span of `trace_id` arrived: a run of it waiting starts its quiet period again; one
        of a run already scored is late (counted)."""
        self.table.touch(trace_id)
        if trace_id in self._scored:
            with self._lock:
                self.late_spans += 1

    def stats(self) -> dict[str, int]:
        """runs_waiting, and runs_scored.<reason> (quiet, max_age, overflow, flush, shutdown)."""
        counts = {f"runs_scored.{reason}": n for reason, n in self.table.counts.items()}
        counts["runs_waiting"] = len(self.table)
        counts["runs_late_spans"] = self.late_spans
        return counts

    def _deliver(self, group: Group[Arrival], reason: str) -> None:
        """The run is quiet (or let go): each of its agent spans is scored, the roots as runs."""
        with self._lock:
            self.held -= len(group.items)
            self._scored[group.key] = None  # type: ignore[index]
            while len(self._scored) > self._max_scored:
                self._scored.popitem(last=False)
        partial = reason if reason in (AGE, OVERFLOW) else None
        # the parent links and agent spans of the whole trace, and of what arrived
        whole = self._traces.run_source(self._traces.trace(group.key), 0)  # type: ignore[arg-type]
        parents = {a.key[1]: a.parent for a in group.items if a.parent is not None}
        agents = {a.key[1] for a in group.items}
        if whole is None:  # its trace was forgotten (its bounds): the run is what arrived
            whole = RunSource(0, parents, {}, {}, frozenset(agents), None)
            partial = partial or "trace_forgotten"
        else:
            parents.update(whole.parents)
            agents.update(whole.agents)
            whole = whole._replace(parents=parents, agents=frozenset(agents))
        for arrival in group.items:
            span_id = arrival.key[1]
            root = not agent_above(parents, span_id, agents)
            began = getattr(arrival.span, "start_time_unix_nano", 0)
            self._score(arrival, whole._replace(root=span_id) if root else None,
                        partial or ("before_start" if 0 < began < self._started_ns else None))

    def _score(self, arrival: Arrival, source: RunSource | None, partial: str | None = None
               ) -> None:
        """An agent span whose run is quiet: scored by the call-scope scorers, and by the
        run-scope ones when it is the run's root (`source`: its run). Never raises."""
        core, key, call = self._core, arrival.key, arrival.call
        chosen: tuple[OnlineScorer, ...] = ()
        try:
            randomness = key[0] & RANDOMNESS_MASK
            if not core.closing:
                chosen = self._choose(arrival.span, call, randomness, "call")
                if source is not None:
                    chosen += self._choose(arrival.span, call, randomness, "run")
        except Exception:  # noqa: BLE001 - the item goes on unscored rather than not at all
            core.log_once("offer", "tracescore: could not consider an offered agent span",
                          exc_info=True)
            chosen = ()
        if not chosen:
            core.export(arrival.item, ())
            return
        scored = Call(call.input, call.output, call.ground_truth, call.agent, chosen,
                      self._traces.input_of(*key))
        if source is not None and any(o in core.run_scorers for o in chosen):
            scored.run_source = source
            scored.partial = partial
        core.submit(key, scored, arrival.item)
