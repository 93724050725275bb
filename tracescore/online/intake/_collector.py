"""`TraceCollector`: the spans of the traces a scorer may sample, for the agent calls in them.

One collector for both front doors; each hands it span views (`_view`) and it keeps what each
span recorded (parent link, tool/context `Item`, `LlmCall`, run `Mark`; read by `_recorded`):

- in process (`ScoringSpanProcessor`), a trace is `open`ed when one of its agent spans starts
  and forgotten once its last open agent span has ended (`end_span`), or `open_loop`ed when an
  LLM call starts and forgotten once its local root has ended (the span above the calls that
  ends last may be their agent call, `_structure`): only traces with an agent call running are
  kept;
- the gateway adds every span of the traces a scorer may sample as they arrive (`add_span`: tool
  calls may come before or after their agent span) and relies on the bounds (`BufferLimits`:
  traces, bytes, age) to forget them; an agent span without content of its own waits for its
  LLM calls at most `BufferLimits.llm_wait_s` (`_llm_wait`); the traces with LLM calls whose top span has not
  come are `llm_traces` (the gateway reads their spans in requests without marker keys).

A span that cannot be read is counted (`skipped`), logged once and contributes nothing.

An agent call then asks, with its trace (`trace`, or what `end` returned), for the items
recorded below its span (`items_under`, `input_of`), the
LLM calls below it (an agent span without content of its own is read from them), and whether it
only contains other agent spans (`agents_below`). Thread-safe; never decodes recorded text.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tracescore._exceptions import ConfigurationError
from tracescore._guard import GUARD
from tracescore.online.intake._llm_calls import LlmCall
from tracescore.online.intake._recorded import carries_item, recorded
from tracescore.online.intake._run_steps import Mark, RunSource
from tracescore.online.intake._trace_input import (
    EMPTY,
    Item,
    TraceInput,
    TraceLimits,
    TraceSpans,
    gather,
)
from tracescore.online.intake._view import SpanView

_TraceIdBytes = bytes  # (the class below has a `bytes` property)
_SPAN_BYTES = 64  # what remembering one span costs besides its recorded text (links, ids)


@dataclass(frozen=True)
class BufferLimits:
    """Bounds of the whole collector (per-call and per-trace bounds are `TraceLimits`)."""

    max_traces: int = 10_000
    max_bytes: int = 64 * 1024 * 1024
    max_age_s: float = 60.0
    llm_wait_s: float = 2.0  # longest an agent span without content waits for its LLM calls

    def __post_init__(self) -> None:
        for name in ("max_traces", "max_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigurationError(f"trace.{name} must be an integer >= 0, got {value!r}")
        age = self.max_age_s
        if isinstance(age, bool) or not isinstance(age, (int, float)) or age <= 0:
            raise ConfigurationError(f"trace.max_age_s must be a number > 0, got {age!r}")
        wait = self.llm_wait_s
        if isinstance(wait, bool) or not isinstance(wait, (int, float)) or wait < 0:
            raise ConfigurationError(f"trace.llm_wait_s must be a number >= 0, got {wait!r}")


class TraceCollector:
    """Recorded items of recent traces, by trace id; thread-safe."""

    def __init__(self, limits: TraceLimits | None = None, bounds: BufferLimits | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits or TraceLimits()
        self.bounds = bounds or BufferLimits()
        self._clock = clock
        self._traces: dict[int, TraceSpans] = {}
        self._costs: dict[int, int] = {}  # bytes charged per trace
        self._bytes = 0
        # traces with LLM calls, by id: their trace id as sent (the gateway lets requests that
        # hold one through its marker check: their spans may be the agent call above the calls)
        self._llm_ids: dict[int, _TraceIdBytes] = {}
        self._llm_bytes: set[_TraceIdBytes] = set()  # its values (read by `llm_trace_bytes`)
        self._lock = threading.Lock()
        self.evicted = 0  # traces forgotten to stay within the bounds
        self.skipped = 0  # spans that could not be read (counted by the readers)

    @property
    def traces(self) -> int:
        return len(self._traces)

    @property
    def bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._traces)

    @property
    def kept(self) -> Mapping[int, TraceSpans]:
        """The traces kept, by id (read only; an empty one is the hot paths' cheap test)."""
        return self._traces

    def __contains__(self, trace_id: object) -> bool:
        return trace_id in self._traces

    def trace_ids(self) -> list[int]:
        """The traces kept, oldest first."""
        with self._lock:
            return list(self._traces)

    def age_of(self, trace_id: int) -> float | None:
        """Seconds since `trace_id` was first seen (None: not kept)."""
        trace = self._traces.get(trace_id)
        return None if trace is None else self._clock() - trace.created

    def open(self, trace_id: int, agent_id: int) -> None:
        """An agent span started: keep its trace's spans until it `close`s."""
        with self._lock:
            trace = self._traces.get(trace_id)
            if trace is None:
                trace = self._new(trace_id)
                self._evict()
            trace.agents.add(agent_id)

    def open_loop(self, trace_id: int) -> None:
        """An LLM call started (in process): keep its trace's spans until its local root ends
        (`end(..., root=True)`): the span above the call that ends last may be its agent call."""
        with self._lock:
            trace = self._traces.get(trace_id)
            if trace is None:
                trace = self._new(trace_id)
                self._evict()
            trace.loop = True

    def loop_ended(self, trace_id: int) -> None:
        """The root of `trace_id` came: no span above its LLM calls is to come (its trace id
        leaves `llm_traces`)."""
        if trace_id in self._llm_ids:
            with self._lock:
                self._drop_llm(trace_id)

    @property
    def llm_traces(self) -> Mapping[int, _TraceIdBytes]:
        """The kept traces with LLM calls: trace id -> its 16 bytes (read only)."""
        return self._llm_ids

    @property
    def llm_trace_bytes(self) -> set[_TraceIdBytes]:
        """The 16 bytes of each of `llm_traces` (read only: not a copy)."""
        return self._llm_bytes

    def _drop_llm(self, trace_id: int) -> None:
        """(Caller holds the lock.)"""
        raw = self._llm_ids.pop(trace_id, None)
        if raw is not None:
            self._llm_bytes.discard(raw)

    def add(self, trace_id: int, span_id: int, parent_id: int | None, item: Item | None,
            llm: LlmCall | None = None, mark: Mark | None = None) -> None:
        """Remember one finished span (the trace is kept from now on if it was not)."""
        with self._lock:
            trace = self._traces.get(trace_id)
            if trace is None:
                trace = self._new(trace_id)
            self._add(trace, trace_id, span_id, parent_id, item, llm, mark)

    def end(self, trace_id: int, span_id: int, parent_id: int | None, item: Item | None,
            llm: LlmCall | None = None, mark: Mark | None = None, *, root: bool = False,
            named: bool = False) -> TraceSpans | None:
        """Remember one finished span of a trace kept since an agent span (or, `open_loop`, an
        LLM call) of it started (spans of other traces are ignored). When it is such an agent
        span, or `root`, the local root of a trace kept for its LLM calls, or `named`, a span
        below it that says it is an agent (`AgentReader.named`): its trace (forgotten here once
        no agent span of it is open and, for LLM calls, its root ended; ask `items_under` & co.
        with it)."""
        with self._lock:
            trace = self._traces.get(trace_id)
            if trace is None:
                return None
            self._add(trace, trace_id, span_id, parent_id, item, llm, mark)
            if span_id in trace.agents:
                trace.agents.discard(span_id)
            elif not ((root or named) and trace.loop):
                return None
            if not trace.agents and (root or not trace.loop):
                self._forget(trace_id)
            return trace

    def add_span(self, view: SpanView, attributes: Mapping[str, Any] | None = None, *,
                 llm: bool = True, marks: bool = False) -> None:
        """Remember one finished span as it arrives (the trace is kept from now on);
        `attributes`: its decoded attributes when the caller has them (None: decoded here if it
        may record an item: `carries_item`). Never raises."""
        try:
            if attributes is None and carries_item(view.attribute_keys()):
                attributes = view.attributes
            item, llm_call, mark = recorded(view, attributes, llm=llm, marks=marks)
            self.add(view.trace_id, view.span_id, view.parent_id, item, llm_call, mark)
        except Exception:  # noqa: BLE001 - counted; the span goes on whatever happens here
            self._skip()

    def end_span(self, view: SpanView, attributes: Mapping[str, Any], *, llm: bool = True,
                 marks: bool = False, root: bool = False, named: bool = False
                 ) -> TraceSpans | None:
        """`end` for one finished span of a trace `open`ed in process; what it recorded is read
        from `attributes` (a span that cannot be read records nothing). Never raises."""
        trace_id = view.trace_id
        if trace_id not in self._traces:
            return None
        item = llm_call = mark = None
        try:
            item, llm_call, mark = recorded(view, attributes, llm=llm, marks=marks)
        except Exception:  # noqa: BLE001 - counted; its trace is kept all the same
            self._skip()
        return self.end(trace_id, view.span_id, view.parent_id, item, llm_call, mark, root=root,
                        named=named)

    def at(self, key: tuple[int, int]) -> tuple[TraceSpans | None, int]:
        """(the kept trace of `key` = (trace id, span id), its span id): what the questions
        below take."""
        return self._traces.get(key[0]), key[1]

    def _skip(self) -> None:
        self.skipped += 1
        GUARD.once("trace_input", "tracescore: could not read a span of a sampled trace "
                   "(tool call, context or LLM call)", exc_info=True)

    def trace(self, trace_id: int) -> TraceSpans | None:
        """The spans of `trace_id` kept so far (to ask `items_under` & co.), None if none."""
        return self._traces.get(trace_id)

    def mark_agent(self, trace: TraceSpans | None, span_id: int) -> None:
        """`span_id` is an agent call: the LLM calls below it are its own, not an outer agent's."""
        if trace is not None:
            with self._lock:
                trace.agent_spans.add(span_id)

    def agents_below(self, trace: TraceSpans | None, span_id: int) -> bool:
        """Whether an agent span was seen below `span_id` (marked with `mark_agent`)."""
        if trace is None:
            return False
        with self._lock:
            return trace.agents_below(span_id)

    def llm_calls_of(self, trace: TraceSpans | None, span_id: int) -> list[LlmCall]:
        """The LLM calls recorded below the agent span `span_id` so far."""
        if trace is None:
            return []
        with self._lock:
            return trace.llm_under(span_id)

    def items_under(self, trace: TraceSpans | None, span_id: int,
                    content: Mapping[int, Mapping[str, str]] | None = None
                    ) -> tuple[list[Item], bool]:
        """The items recorded at and below `span_id` so far, as recorded (decode them with
        `trace_input_of`), and whether the trace lost spans to `TraceLimits.max_spans`."""
        if trace is None:
            return [], False
        with self._lock:
            return trace.under(span_id, content), trace.dropped > 0

    def input_of(self, trace_id: int, span_id: int) -> TraceInput:
        """The tool calls and context recorded below the agent span `span_id` so far."""
        items, dropped = self.items_under(self._traces.get(trace_id), span_id)
        return trace_input_of(items, dropped, self.limits)

    def run_source(self, trace: TraceSpans | None, root_id: int,
                   content: Mapping[int, Mapping[str, str]] | None = None) -> RunSource | None:
        """What was kept below the run root `root_id` (a copy, for `run_of`); None when its
        trace is not kept."""
        if trace is None:
            return None
        with self._lock:
            return RunSource(root_id, dict(trace.parents), dict(trace.marks), dict(trace.items),
                             frozenset(trace.agent_spans), content)

    def _add(self, trace: TraceSpans, trace_id: int, span_id: int, parent_id: int | None,
             item: Item | None, llm: LlmCall | None, mark: Mark | None = None) -> None:
        """(Caller holds the lock.)"""
        dropped = trace.dropped
        trace.add(span_id, parent_id, item, self.limits.max_spans, llm, mark)
        if llm is not None and trace_id not in self._llm_ids:
            raw = self._llm_ids[trace_id] = trace_id.to_bytes(16, "big")
            self._llm_bytes.add(raw)
        if trace.dropped == dropped:
            cost = (_SPAN_BYTES + (item.chars if item is not None else 0)
                    + (llm.chars if llm is not None else 0))
            self._costs[trace_id] += cost
            self._bytes += cost
        self._evict()

    def _new(self, trace_id: int) -> TraceSpans:
        trace = self._traces[trace_id] = TraceSpans(self._clock())
        self._costs[trace_id] = 0
        return trace

    def _forget(self, trace_id: int) -> None:
        del self._traces[trace_id]
        self._drop_llm(trace_id)
        self._bytes -= self._costs.pop(trace_id, 0)

    def _evict(self) -> None:
        """Forget the oldest traces past the bounds (caller holds the lock)."""
        traces, bounds = self._traces, self.bounds
        too_old = self._clock() - bounds.max_age_s if bounds.max_age_s != math.inf else -math.inf
        while traces:
            oldest_id = next(iter(traces))
            if (len(traces) <= bounds.max_traces and self._bytes <= bounds.max_bytes
                    and traces[oldest_id].created >= too_old):
                break
            self._forget(oldest_id)
            self.evicted += 1


def trace_input_of(items: list[Item], dropped: bool, limits: TraceLimits) -> TraceInput:
    """`items` decoded within `limits`; `dropped`: the trace lost spans (then truncated)."""
    if not items and not dropped:
        return EMPTY
    found = gather(items, limits)
    if dropped and not found.truncated:
        return TraceInput(found.tool_calls, found.context, True, found.last_tool)
    return found


def collector_from(options: Mapping[str, Any] | None) -> TraceCollector:
    """A collector from the gateway's `trace:` settings (TraceLimits and BufferLimits fields)."""
    options = dict(options or {})
    limits = {k: options.pop(k) for k in ("max_tool_calls", "max_chars", "max_spans")
              if k in options}
    return TraceCollector(TraceLimits(**limits), BufferLimits(**options))


def in_process(limits: TraceLimits, max_traces: int) -> TraceCollector:
    """A collector for in-process agent calls: bounded in traces only (an agent call may run
    for long and its trace is forgotten when it ends)."""
    return TraceCollector(limits, BufferLimits(max_traces=max_traces, max_bytes=1 << 62,
                                               max_age_s=math.inf))
