"""Hold, score, forward: the gateway's engine between the OTLP door in front and the one behind.

Each request is split once: spans that no recogniser can match, or whose trace no scorer
samples, stay in the request and go on as they came (serialized protobuf, never turned into SDK
objects); recognised agent spans are handed, as one-span protobuf requests, to the same
`ScoringCore` in-process scoring uses (the engine keeps them in its own hold table, `_held`),
and leave with the events it writes back onto them. A request with nothing to hold is first offered
to `send_inline` (the next hop takes it before the acknowledgement: no journal write at all);
everything else is journaled before it is acknowledged and removed from the journal once the
next hop has it.

Spans of traces a scorer may sample also feed a bounded `TraceCollector` (the intake's): an
agent span's scorers get the tool calls and context recorded by the spans of its trace that
arrived before it (or with it). An agent span without content of its own (`_llm_calls`) is read
from the LLM calls below it in that buffer; when they have not all arrived yet it is journaled
and waits for them, at most `trace.llm_wait_s`, then goes on unscored (reason `no_llm_calls`).
A span without agent marker at the top of a loop of LLM calls (a root, or a SERVER / CONSUMER
span) is read from them the same way (`intake._structure`): a request without marker keys is read
only for its spans of traces with LLM calls whose top span has not come (`llm_traces`).

Agent spans of a trace a run-scope scorer samples wait for the run's quiet period first
(`_run_scope`).

(About 600 lines: routing, the hold table, the waits for LLM calls and the run and conversation
scopes' intake hooks share one lock and the duplicate checks across them; apart they would pass
it around. The scopes' own work is in `_run_scope` and `online._conversation_scope`.)
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracescore import _semconv as sc
from tracescore._exceptions import ConfigurationError
from tracescore.gateway import _otlp
from tracescore.gateway._journal import HELD, PASS, Entry, Journal
from tracescore.gateway._metrics import GatewayMetrics
from tracescore.gateway._run_scope import Arrival, RunScope
from tracescore.gateway._split import split_request
from tracescore.instrument._calls import AgentCall
from tracescore.online.core import (
    FLUSH,
    HELD_OVERFLOW,
    MAX_LINKS,
    NO_LLM_CALLS,
    RANDOMNESS_MASK,
    SCOPE,
    SHUTDOWN,
    EventPayload,
    JudgeSpan,
    OnlineMetrics,
    OnlineScorer,
    ProcessorOptions,
    ScoreRun,
    ScoringCore,
    Turn,
    as_conversation_options,
    as_online_scorers,
    carrier_attributes,
    carrier_fields,
    carrier_time,
)
from tracescore.online.intake import (
    EMPTY,
    ITEM_MARKERS,
    AgentReader,
    ContentlessAgent,
    LogContent,
    OtlpSpanView,
    RecognisedCall,
    TraceCollector,
    TraceInput,
    Unreadable,
    attributes_of,
    collector_from,
    from_llm_calls,
    is_top,
    note_unreadable,
    with_event_content,
)

_log = logging.getLogger("tracescore.gateway")


_Item = tuple[int | None, ExportTraceServiceRequest]  # what the core holds: journal row, span


class Output(Protocol):
    """Where finished requests go (the forwarder, or a file for `rescore`)."""

    def put(self, ids: tuple[int, ...], body: bytes, count: int) -> None: ...


@dataclass(slots=True)
class _Waiting:
    """An agent span without content, journaled, waiting for the LLM calls below it."""

    row: int | None
    single: ExportTraceServiceRequest
    agent: ContentlessAgent
    deadline: float


class Engine:
    """Splits requests into pass-through and held agent spans; scores the latter in-process."""

    def __init__(self, *, scorers: Sequence[Any], recognisers: Sequence[Any], output: Output,
                 metrics: GatewayMetrics, journal: Journal | None = None,
                 processor_options: Mapping[str, Any] | None = None,
                 meter_provider: Any = None, logger_provider: Any = None,
                 pass_through: bool = True,
                 send_inline: Callable[..., bool] | None = None,
                 trace_options: Mapping[str, Any] | None = None,
                 max_request_bytes: int | None = None,
                 keep: Callable[[Any, tuple[OnlineScorer, ...]], tuple[OnlineScorer, ...]]
                 | None = None, run_options: Mapping[str, Any] | None = None,
                 conversations: Mapping[str, Any] | None = None, live: bool = True) -> None:
        # live: spans arrive as they happen (not rescore's files): a run that began before
        # this engine started may lack spans that went to the instance before
        self._recognisers = tuple(recognisers)
        self._keep = keep  # rescore: which of a span's chosen scorers still score it
        self._reader = reader = AgentReader(self._recognisers)  # one outcome per agent span
        self._marker_bytes = tuple(m.encode() for m in reader.request_markers(ITEM_MARKERS))
        self.traces: TraceCollector = collector_from(trace_options)
        self.log_content = LogContent()  # GenAI content log records, by span (`content_logged`)
        self._output = output
        self._send_inline = send_inline  # True: the next hop has it (nothing held in it)
        self._max_bytes = max_request_bytes  # requests out are split under it (None: never)
        self._journal = journal
        self._metrics = metrics
        self._pass_through = pass_through  # False: only agent spans come out (rescore)
        self.offered = 0  # agent spans offered for scoring
        self._lock = threading.Lock()
        # agent spans inside the core: key -> (journal row or None, one-span request)
        self._held: dict[_otlp.SpanKey, _Item] = {}
        # agent spans without content waiting for their LLM calls, in deadline order
        self._waiting: dict[_otlp.SpanKey, _Waiting] = {}
        self._waited = threading.Condition(self._lock)
        self._timer: threading.Thread | None = None
        self._closed = False
        online = as_online_scorers(scorers)
        if not online:
            raise ConfigurationError("ScoringSpanProcessor needs at least one scorer")
        options = ProcessorOptions(**dict(processor_options or {}))
        self._max_waiting = options.max_held_spans
        self.core = ScoringCore(online, options, export=self._finished, carrier=self._carrier,
                                trace_limits=self.traces.limits,
                                metrics=OnlineMetrics(meter_provider),
                                logger_provider=logger_provider,
                                conversations=as_conversation_options(conversations),
                                conversation_carrier=self._conversation_carrier,
                                turn_store=journal, judge_spans=self._judge_spans)
        self._guard_offer = self.core.guard.site(  # forwarded as it is rather than not at all
            "offer", "tracescore: could not consider an offered agent span")
        scope = self.core.conversations
        self._turns = scope.tracker if scope is not None else None  # None: no conversation scorer
        # every agent span may be a turn of a conversation (sampled by its id, not the trace's)
        self._threshold = 0 if self._turns is not None else self.core.threshold
        # attributes are decoded for the filters only when a scorer has one
        self._filtered = any(o.filtered for o in online)
        # run-scope scorers: agent spans of the runs they sample wait for the run's quiet period
        self._runs: RunScope | None = None
        if self.core.run_scorers:
            self._runs = RunScope(run_options, self.traces, self.core, self._choose,
                                  started_ns=time.time_ns() if live else None)
            self._run_threshold = min(o.threshold for o in self.core.run_scorers)
            self.core.add_timer(self._runs.table.expire)

    @property
    def held(self) -> int:
        """Agent spans waiting for their scores (or for the LLM calls they are read from)."""
        return len(self._held) + len(self._waiting)

    def run_stats(self) -> dict[str, int]:
        """Runs waiting for their quiet period, and runs let go by reason (empty: no run-scope
        scorer)."""
        return self._runs.stats() if self._runs is not None else {}

    def accept(self, request: ExportTraceServiceRequest, raw: bytes | None = None, *,
               count: int | None = None) -> int:
        """Journal and route one request; returns its span count (`count`: already counted).
        `raw`: the request as received (protobuf), forwarded as is when nothing in it is held
        (sent inline when possible, and then never journaled: the next hop has it before the
        acknowledgement)."""
        found, touched = self._agent_spans(request, raw)
        if touched:
            self._resume(touched)
        if count is None:
            count = _otlp.count_spans(request)
        if not self._pass_through:
            if found:
                self._hold(found)
            return count
        if not found:
            body = raw if raw is not None else request.SerializeToString()
            if self._max_bytes is not None and len(body) > self._max_bytes:
                self._pass_split(request)
                return count
            if self._send_inline is not None and self._send_inline(
                    body, count, lambda: self._journal_add([(PASS, count, body)])):
                return count
            ids = self._journal_add([(PASS, count, body)])
            self._output.put(ids, body, count)
            return count
        singles = self._hold(found, offer=False)
        for scope_spans, index in sorted(((f[1], f[3]) for f in found),
                                         key=lambda pair: -pair[1]):
            del scope_spans.spans[index]
        rest = count - len(found)
        parts = self._parts(request) if rest else []
        rows = [(HELD, 1, single.SerializeToString()) for single, _, _ in singles]
        rows.extend((PASS, part_count, part) for part, part_count in parts)
        ids = self._journal_add(rows)
        for index, (part, part_count) in enumerate(parts):
            row = ids[len(singles) + index] if ids else None
            self._output.put(() if row is None else (row,), part, part_count)
        for (single, call, trace), row in zip(singles, ids or [None] * len(singles)):
            self._offer(row, single, call, trace)
        return count

    def _parts(self, request: ExportTraceServiceRequest) -> list[tuple[bytes, int]]:
        """The request serialized, in parts under the byte limit (`Undeliverable` when a span
        cannot fit even capped: nothing is journaled, the sender is refused)."""
        if self._max_bytes is None or request.ByteSize() <= self._max_bytes:
            return [(request.SerializeToString(), _otlp.count_spans(request))]
        parts = split_request(request, self._max_bytes)
        if parts.capped:
            self._metrics.add("capped_for_next_hop", parts.capped)
        return parts.bodies

    def _pass_split(self, request: ExportTraceServiceRequest) -> None:
        parts = self._parts(request)
        ids = self._journal_add([(PASS, part_count, part) for part, part_count in parts])
        for index, (part, part_count) in enumerate(parts):
            self._output.put(ids[index:index + 1], part, part_count)

    def _hold(self, found: list[Any], offer: bool = True
              ) -> list[tuple[ExportTraceServiceRequest, RecognisedCall, TraceInput]]:
        """One-span requests of the agent spans found (offered now unless `offer` is False),
        with what the spans of their traces recorded so far."""
        singles = [(_otlp.single_request(rs, ss, span), call,
                    self.traces.input_of(*_otlp.key_of(span)))
                   for rs, ss, span, _, call in found]
        if offer:
            for single, call, trace in singles:
                self._offer(None, single, call, trace)
        return singles

    def replay(self) -> int:
        """Forward (and offer again for scoring) what the journal kept from a previous run."""
        if self._journal is None:
            return 0
        if self._turns is not None:  # conversations where the last run left them
            self._turns.restore_all(self._journal.conversations())
        replayed = 0
        for entry in self._journal.entries():
            replayed += entry.count
            if entry.kind == HELD:
                self._replay_held(entry)
            else:
                self._output.put((entry.id,), entry.body, entry.count)
        if replayed:
            self._metrics.add("replayed", replayed)
            _log.info("tracescore: replaying %d journaled spans", replayed)
        return replayed

    def flush(self, timeout_s: float) -> bool:
        if self._runs is not None:  # runs waiting for their quiet period are scored now
            self._runs.table.release_all(FLUSH)
        return self.core.flush(max(0.0, timeout_s))

    def end_of_input(self) -> None:
        """The input is complete (`rescore`): agent spans still waiting for their LLM calls get
        none; they go on unscored as after `trace.llm_wait_s` (reason `no_llm_calls`)."""
        with self._lock:
            waiting = list(self._waiting.values())
            self._waiting.clear()
        for entry in waiting:
            self._settle_waiting(entry, NO_LLM_CALLS)

    def shutdown(self, timeout_s: float) -> None:
        """Bounded wait for scoring, then every held span goes out (unscored ones with a reason)."""
        with self._lock:
            self._closed = True
            waiting = list(self._waiting.values())
            self._waiting.clear()
            self._waited.notify_all()
        for entry in waiting:  # read with what arrived, else unscored
            self._settle_waiting(entry, SHUTDOWN)
        if self._runs is not None and not self.core.closing:  # scored within the wait below
            self._runs.table.release_all(SHUTDOWN)
        if self.core.closing:
            return
        wait = min(self.core.options.shutdown_timeout_s, max(0.0, timeout_s) * 0.8)
        self.core.close(wait)
        self.core.stop_isolation(wait)

    # --- internals ----------------------------------------------------------------------------
    def _agent_spans(self, request: ExportTraceServiceRequest, raw: bytes | None
                     ) -> tuple[list[Any], set[int]]:
        """(resource spans, scope spans, span, index, call) of the spans to hold, and the
        traces with spans waiting for their LLM calls that got spans here. Cheap rejects
        first: no marker key anywhere in the raw protobuf (one substring search each, the
        common case), then per span the trace-id sampling test (spans that pass it feed the
        trace buffer), the marker keys, the chain. An agent span without content is read
        once the whole request is in the buffer (its LLM calls may come after it), and so are
        the agent spans nothing reads and the loop tops without marker that have LLM calls
        below them (`AgentReader.structural`); an agent-like span nothing reads is counted per
        framework and reason (`Diagnoser`)."""
        found: list[Any] = []
        touched: set[int] = set()
        only: frozenset[bytes] | None = None  # the traces to read (None: all)
        if raw is not None and not any(marker in raw for marker in self._marker_bytes):
            # no marker: read only its spans of traces with LLM calls whose top span has not
            # come yet (one of them may be their agent call: `_structure`)
            looping = self.traces.llm_trace_bytes
            if not looping:
                return found, touched
            only = _awaited_in(raw, looping)
            if not only:
                return found, touched
        reader, threshold, held = self._reader, self._threshold, self._held
        tops: list[Any] = []  # spans at the top of a loop not read by their markers
        misses: list[Any] = []  # agent-like spans not read (counted once the request is in)
        watched = reader.watched  # the markers, and the keys of agent-like spans
        readable = watched | ITEM_MARKERS  # spans whose attributes are decoded (once)
        randomness = _otlp.randomness
        waiting, runs = self._waiting, self._runs
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                for index, span in enumerate(ss.spans):
                    if randomness(span.trace_id) < threshold or (
                            only is not None and span.trace_id not in only):
                        continue
                    keys = {kv.key for kv in span.attributes}
                    if sc.TS_JUDGE in keys:
                        continue  # a judge's own call (`_judge_spans`): never scored
                    attributes = (attributes_of(span.attributes)
                                  if not readable.isdisjoint(keys) or reader.shaped(keys)
                                  else None)
                    logged = (attributes if attributes is None or not len(self.log_content)
                              else self.log_content.with_logged(  # a model call's logged
                                  _otlp.key_of(span), attributes))  # messages
                    self.traces.add_span(OtlpSpanView(span), logged, marks=runs is not None)
                    if logged is not None and self.log_content.kept:  # its messages may come
                        self.log_content.note_call(  # later: read then (`content_logged`)
                            _otlp.key_of(span), int.from_bytes(span.parent_span_id, "big")
                            or None, span.start_time_unix_nano, logged)
                    if runs is not None:
                        runs.touch(int.from_bytes(span.trace_id, "big"))
                    if waiting:
                        touched.add(int.from_bytes(span.trace_id, "big"))
                    parent = int.from_bytes(span.parent_span_id, "big") or None
                    top = is_top(parent, OtlpSpanView(span).kind)
                    if top:  # nothing above its LLM calls is to come
                        self.traces.loop_ended(int.from_bytes(span.trace_id, "big"))
                    if watched.isdisjoint(keys):
                        if top:
                            tops.append((rs, ss, span, index, None, keys, attributes))
                        continue
                    call, read = self._read(span, attributes if attributes is not None
                                            else attributes_of(span.attributes))
                    if reader.wrapper(call, parent):
                        continue  # a wrapper of one model turn: part of the agent call above
                    if not isinstance(call, (RecognisedCall, ContentlessAgent)):
                        if top:
                            tops.append((rs, ss, span, index, call, keys, read))
                        elif call is not None:
                            misses.append((rs, ss, span, index, call, None, read))
                        continue
                    # the LLM calls below it are its own
                    self.traces.mark_agent(*self.traces.at(_otlp.key_of(span)))
                    key = _otlp.key_of(span)
                    if key not in held and key not in waiting:
                        found.append((rs, ss, span, index, call))
        # the request is in: agent spans not read are read from their LLM calls (the inner
        # ones first: those calls are theirs), then loop tops by the trace's shape
        unread = []
        for rs, ss, span, index, call, keys, read in [*misses, *tops]:
            key = _otlp.key_of(span)
            at = self.traces.at(key)
            agent = (reader.unreadable_with_calls(self.traces, *at, call, span.name, read)
                     or (reader.structural(self.traces, *at, None, OtlpSpanView(span).kind,
                                           span.name, keys, read) if keys is not None else None))
            if agent is not None:
                self.traces.mark_agent(*at)
                if key not in held and key not in waiting:
                    found.append((rs, ss, span, index, agent))
            elif call is not None:
                unread.append((span, call, read))
        for span, call, read in unread:  # not one that only wraps agent spans
            if not self.traces.agents_below(*self.traces.at(_otlp.key_of(span))):
                self._count_unreadable(call, span.name, read)
        return self._read_contentless(found), touched

    def _read(self, span: Any, attributes: Mapping[str, Any]) -> tuple[Any, Mapping[str, Any]]:
        """`AgentReader.read` of a span, with its content log records when it is not read
        without them (part of them may have arrived: it then waits as one without content)."""
        events = [(e.name, e.attributes) for e in span.events]
        call, read = self._reader.read(span.name, attributes, events, attributes_of)
        if not isinstance(call, RecognisedCall) and len(self.log_content):
            joined, decode = self.log_content.joined(_otlp.key_of(span), events, attributes_of)
            if joined is not events:
                logged, read_logged = self._reader.read(span.name, attributes, joined, decode)
                if isinstance(logged, RecognisedCall):
                    return logged, read_logged
        return call, read

    def _read_contentless(self, found: list[Any]) -> list[Any]:
        """`found` with its agent spans without content read from their LLM calls where these
        are here; one that only contains agent spans below it is no agent call of its own."""
        kept = []
        for rs, ss, span, index, call in found:
            hollow = self._reader.hollow(call)  # its input holds no question
            if hollow is not None:
                calls = self.traces.llm_calls_of(*self.traces.at(_otlp.key_of(span)))
                call = from_llm_calls(hollow, calls) or call if calls else call
            if isinstance(call, ContentlessAgent):
                call = self._reader.from_trace(self.traces, *self.traces.at(_otlp.key_of(span)),
                                               call)
                if call is None:
                    continue
            kept.append((rs, ss, span, index, call))
        return kept

    def _unreadable(self, agent: ContentlessAgent, name: str,
                    attributes: Mapping[str, Any]) -> None:
        """Count and log (once per framework and reason) an agent read from its LLM calls that
        could not be read."""
        unreadable = self._reader.unread(agent, name, attributes)
        if unreadable is not None:
            self._count_unreadable(unreadable, name, attributes)

    def _count_unreadable(self, unreadable: Unreadable, name: str,
                          attributes: Mapping[str, Any]) -> None:
        self._metrics.add_labelled("unreadable_agent_spans",
                                   (unreadable.framework, unreadable.reason))
        note_unreadable(unreadable, name, attributes)

    def _offer(self, row: int | None, single: ExportTraceServiceRequest,
               call: RecognisedCall | ContentlessAgent, trace: TraceInput = EMPTY) -> None:
        if isinstance(call, ContentlessAgent):
            self._wait(row, single, call)
            return
        rs = single.resource_spans[0]
        ss = rs.scope_spans[0]
        span = ss.spans[0]
        key = _otlp.key_of(span)
        with self._lock:
            if key in self._held:  # the same span twice at once (a sender's retry): forward it
                self._output.put(() if row is None else (row,), single.SerializeToString(), 1)
                return
            self._held[key] = (row, single)
            self.offered += 1
        if self._score(key, span, (row, single), call, trace):
            self._metrics.add("held")

    def _score(self, key: _otlp.SpanKey, span: Any, item: _Item, call: RecognisedCall,
               trace: TraceInput) -> bool:
        """Hand a recognised agent span to the core (`ScoringCore.take`): True when a scorer
        took it or its run keeps it; else it goes on at once. Never raises."""
        try:
            attributes = (attributes_of(span.attributes)
                          if self._filtered or self._turns is not None else {})
            agent_call = AgentCall(
                span=None,  # type: ignore[arg-type]  # no SDK span at the gateway
                name=call.agent, input=call.input, output=call.output,
                ground_truth=call.ground_truth, attributes=attributes,
            )
        except Exception:  # noqa: BLE001 - forwarded as it came rather than not at all
            self.core.log_once("offer", "tracescore: could not consider an offered agent span",
                               exc_info=True)
            self.core.export(item, ())
            return False
        runs = self._runs
        defer = None
        if runs is not None and key[0] & RANDOMNESS_MASK >= self._run_threshold:
            def defer() -> bool:  # scored once its run is quiet (`RunScope`)
                parent = int.from_bytes(span.parent_span_id, "big") or None
                runs.arrive(Arrival(key, parent, item, call, span), item[1].ByteSize())
                return True
        return self.core.take(key, agent_call, item, trace, threshold=self._threshold,
                              end_ns=span.end_time_unix_nano or None, defer=defer,
                              chooser=lambda c, r: self._kept(span, self.core.choose(c, r)))

    def _choose(self, span: Any, call: RecognisedCall, randomness: int, scope: str | None
                ) -> tuple[OnlineScorer, ...]:
        """The scorers (of `scope`, None: all) that sample the agent span `span`."""
        attributes = attributes_of(span.attributes) if self._filtered else {}
        agent_call = AgentCall(
            span=None,  # type: ignore[arg-type]  # no SDK span at the gateway
            name=call.agent, input=call.input, output=call.output,
            ground_truth=call.ground_truth, attributes=attributes,
        )
        return self._kept(span, self.core.choose(agent_call, randomness, scope=scope))

    def _kept(self, span: Any, chosen: tuple[OnlineScorer, ...]) -> tuple[OnlineScorer, ...]:
        """`chosen` less the scorers `rescore` says have scored `span` already."""
        if chosen and self._keep is not None:
            chosen = self._keep(span, chosen)
        return chosen

    def _replay_held(self, entry: Entry) -> None:
        single = ExportTraceServiceRequest.FromString(entry.body)
        span = _otlp.only_span(single)
        call, read = self._reader.read(span.name, attributes_of(span.attributes),
                                       [(e.name, e.attributes) for e in span.events],
                                       attributes_of)
        if not isinstance(call, RecognisedCall):  # held for the LLM calls below it (`_structure`)
            call = self._reader.held(call, span.name, read)
        self._offer(entry.id, single, call)

    # --- agent spans without content, waiting for their LLM calls -----------------------------
    def _wait(self, row: int | None, single: ExportTraceServiceRequest,
              agent: ContentlessAgent) -> None:
        """Keep a journaled agent span until its LLM calls arrive (`trace.llm_wait_s`)."""
        key = _otlp.key_of(_otlp.only_span(single))
        wait_s = self.traces.bounds.llm_wait_s
        with self._lock:
            duplicate = key in self._held or key in self._waiting
            room = (not self._closed and wait_s > 0
                    and len(self._waiting) < self._max_waiting)
            if not duplicate and room:
                self._waiting[key] = _Waiting(row, single, agent, time.monotonic() + wait_s)
                self._waited.notify_all()
                if self._timer is None:
                    self._timer = threading.Thread(target=self._expire_waiting, daemon=True,
                                                   name="tracescore-llm-wait")
                    self._timer.start()
        if duplicate:  # the same span twice at once (a sender's retry): forward it
            self._output.put(() if row is None else (row,), single.SerializeToString(), 1)
        elif room:
            self._metrics.add("llm_wait")
            if self.log_content.events(*key):  # its content was logged since it was read
                self.content_logged({key})
        else:
            if not self._closed and wait_s <= 0:
                span = _otlp.only_span(single)
                self._unreadable(agent, span.name, _readable(span, None))
            self._unscored(row, single, agent,
                           SHUTDOWN if self._closed else
                           NO_LLM_CALLS if wait_s <= 0 else HELD_OVERFLOW)

    def _resume(self, trace_ids: set[int]) -> None:
        """Offer the waiting agent spans of `trace_ids` whose LLM calls have now arrived."""
        with self._lock:
            candidates = [(key, entry) for key, entry in self._waiting.items()
                          if key[0] in trace_ids]
        for key, entry in candidates:
            call = from_llm_calls(entry.agent, self.traces.llm_calls_of(*self.traces.at(key)))
            if call is None:
                continue
            with self._lock:
                if self._waiting.pop(key, None) is None:
                    continue  # its wait ended meanwhile
            self._offer(entry.row, entry.single, call, self.traces.input_of(*key))

    def content_logged(self, keys: set[_otlp.SpanKey]) -> None:
        """Offer the waiting agent spans of `keys` that their content log records now read, and
        those waiting for model calls of `keys` whose messages were logged after them."""
        calls = self.log_content.logged_calls(keys)
        for (trace_id, span_id), parent_id, model_call in calls:
            self.traces.add(trace_id, span_id, parent_id, None, model_call)
        if calls:
            self._resume({trace_id for (trace_id, _), _, _ in calls})
        with self._lock:
            candidates = [(key, self._waiting[key]) for key in keys if key in self._waiting]
        for key, entry in candidates:
            span = _otlp.only_span(entry.single)
            events, decode = self.log_content.joined(
                key, [(e.name, e.attributes) for e in span.events], attributes_of)
            call, _ = self._reader.read(span.name, attributes_of(span.attributes), events,
                                        decode, contentless=False)
            if not isinstance(call, RecognisedCall):
                continue
            with self._lock:
                if self._waiting.pop(key, None) is None:
                    continue  # its wait ended meanwhile
            self._offer(entry.row, entry.single, call, self.traces.input_of(*key))

    def _expire_waiting(self) -> None:
        """The timer thread: agent spans whose wait is over go on, read or unscored."""
        while True:
            with self._lock:
                if self._closed:
                    self._timer = None
                    return
                now = time.monotonic()
                expired = []
                for key, entry in self._waiting.items():  # deadlines are in insertion order
                    if entry.deadline > now:
                        break
                    expired.append(key)
                taken = [self._waiting.pop(key) for key in expired]
                if not taken:
                    first = next(iter(self._waiting.values()), None)
                    self._waited.wait(None if first is None else first.deadline - now)
                    continue
            for entry in taken:
                self._settle_waiting(entry, NO_LLM_CALLS)

    def _settle_waiting(self, entry: _Waiting, reason: str) -> None:
        """A wait that ended: offered with the LLM calls that arrived, else unscored; never
        raises (the timer thread must outlive any span)."""
        try:
            span = _otlp.only_span(entry.single)
            key = _otlp.key_of(span)
            call = from_llm_calls(entry.agent, self.traces.llm_calls_of(*self.traces.at(key)))
            if call is not None:
                self._offer(entry.row, entry.single, call, self.traces.input_of(*key))
                return
            if self.traces.agents_below(*self.traces.at(key)):  # it only contains agent spans
                self._output.put(() if entry.row is None else (entry.row,),
                                 entry.single.SerializeToString(), 1)
                return
            if reason == NO_LLM_CALLS:
                self._metrics.add("llm_wait_expired")
                self._unreadable(entry.agent, span.name, _readable(span, None))
            self._unscored(entry.row, entry.single, entry.agent, reason)
        except Exception:  # noqa: BLE001 - the span goes on as it came, whatever happens
            _log.warning("tracescore: could not settle a waiting agent span", exc_info=True)
            key = _otlp.key_of(entry.single.resource_spans[0].scope_spans[0].spans[0])
            with self._lock:  # unless the processor has it already
                held = key in self._held
            if not held:
                self._output.put(() if entry.row is None else (entry.row,),
                                 entry.single.SerializeToString(), 1)

    def _unscored(self, row: int | None, single: ExportTraceServiceRequest,
                  agent: ContentlessAgent, reason: str) -> None:
        """Forward an agent span that cannot be read, with an 'unscored' event per scorer that
        would have sampled it (trace id, `agents` and `attributes` filters), each counted as
        dropped with `reason`."""
        span = _otlp.only_span(single)
        key = _otlp.key_of(span)
        with self._lock:
            if key in self._held:  # already on its way
                self._output.put(() if row is None else (row,), single.SerializeToString(), 1)
                return
            self._held[key] = (row, single)
        scorers: dict[str, OnlineScorer] = {}
        with self._guard_offer:
            scorers = self.core.would_sample(key[0] & RANDOMNESS_MASK, agent.agent,
                                             attributes_of(span.attributes))
        self.core.unscored((row, single), scorers, reason, agent.agent)

    def _journal_add(self, rows: list[tuple[int, int, bytes]]) -> tuple[int, ...]:
        if self._journal is None:
            return ()
        return tuple(self._journal.add(rows))

    def _finished(self, item: _Item, events: Sequence[EventPayload]) -> None:
        """A span back from the core, with the events that landed on it: it goes on."""
        row, single = item
        span = _otlp.only_span(single)
        with self._lock:
            self._held.pop(_otlp.key_of(span), None)
        if events:
            self._count_cost(events)
            _otlp.add_events(span, events, span.end_time_unix_nano or time.time_ns())
        self._output.put(() if row is None else (row,), single.SerializeToString(), 1)

    def _carrier(self, run: ScoreRun, end_ns: int) -> None:
        """A carrier span beside the evaluated one: goes on at once (not journaled)."""
        _, single = run.item
        self._count_cost(run.events)
        at, delay_ms = carrier_time(_otlp.only_span(single).end_time_unix_nano, end_ns)
        request = _otlp.carrier_request(
            single, f"{sc.EVALUATION_SPAN_PREFIX} {run.online.scorer_name}",
            carrier_attributes(run.key[1], run.events, run.agent, delay_ms), run.events,
            start_ns=at, end_ns=at, scope=SCOPE.name)
        self._output.put((), request.SerializeToString(), 1)

    def _conversation_carrier(self, run: ScoreRun, turns: Sequence[Turn], end_ns: int) -> None:
        """A conversation's carrier span: a child of its last turn, linked to every turn
        (journaled: its version is marked scored once it is delivered)."""
        self._count_cost(run.events)
        last = turns[-1]
        at, delay_ms = carrier_time(last.end_ns, end_ns)
        evaluated = ExportTraceServiceRequest()
        evaluated.resource_spans.add().scope_spans.add().spans.add(
            trace_id=last.trace_id.to_bytes(16, "big"), span_id=last.span_id.to_bytes(8, "big"))
        request = _otlp.carrier_request(
            evaluated, f"{sc.EVALUATION_SPAN_PREFIX} {run.online.scorer_name}",
            carrier_fields(run, turns, delay_ms), run.events, start_ns=at, end_ns=at,
            scope=SCOPE.name)
        span = _otlp.only_span(request)
        for turn in turns[-MAX_LINKS:-1]:  # the last turn is linked already
            span.links.add(trace_id=turn.trace_id.to_bytes(16, "big"),
                           span_id=turn.span_id.to_bytes(8, "big"))
        body = request.SerializeToString()
        self._output.put(self._journal_add([(PASS, 1, body)]), body, 1)
        if run.judge:  # the judge traced, linked to the last turn
            self._judge_spans((None, evaluated), run.judge)

    def _judge_spans(self, item: _Item, spans: Sequence[JudgeSpan]) -> None:
        """The judge's calls, traced: go on at once (not journaled)."""
        _, single = item
        request = _otlp.judge_request(single, spans)
        self._output.put((), request.SerializeToString(), len(spans))

    def _count_cost(self, events: Sequence[EventPayload]) -> None:
        cost = 0.0
        for name, attributes in events:
            value = attributes.get(sc.TS_JUDGE_COST_USD)
            if name == sc.GEN_AI_EVALUATION_RESULT and isinstance(value, (int, float)):
                cost += float(value)
        if cost:
            self._metrics.add("judge_cost_usd", cost)


# a span's trace id as serialized: field 1, 16 bytes (lookahead: overlapping matches too)
_TRACE_ID = re.compile(rb"(?=\x0a\x10(.{16}))", re.DOTALL)
_SEARCHED = 32  # awaited traces looked for one by one; past it, the request's ids are scanned


def _awaited_in(raw: bytes, awaited: set[bytes]) -> frozenset[bytes]:
    """The awaited trace ids (16 bytes each) a serialized request holds spans of: a substring
    search per id for a few, else one scan of the request's trace-id fields (a chance match of
    other bytes is harmless: it only adds ids to look up)."""
    if len(awaited) <= _SEARCHED:
        return frozenset(tid for tid in tuple(awaited) if tid in raw)
    return frozenset(awaited.intersection(_TRACE_ID.findall(raw)))


def _readable(span: Any, attributes: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """What the recognisers read of an OTLP span: its attributes (decoded here when None), with
    the GenAI content its events recorded (`_event_content`)."""
    if attributes is None:
        attributes = attributes_of(span.attributes)
    if not span.events:
        return attributes
    return with_event_content(attributes, ((e.name, e.attributes) for e in span.events),
                              attributes_of)
