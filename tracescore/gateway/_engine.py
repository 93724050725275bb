"""Hold, score, forward: the gateway's engine between the OTLP door in front and the one behind.

A translator: OTLP requests in, as span views for the intake; results out, as forwarded
protobuf. Each request is split once (`AgentSpans.find`): spans that no recogniser can match, or
whose trace no scorer samples, stay in the request and go on as they came (serialized protobuf,
never turned into SDK objects); recognised agent spans are handed, as one-span requests, to the
same `ScoringCore` in-process scoring uses (the engine keeps them in its hold table, `_held`),
and leave with the events it writes back onto them (`Outbound`). A request with nothing to hold
is first offered to `send_inline` (the next hop takes it before the acknowledgement: no journal
write at all); everything else is journaled before it is acknowledged and removed from the
journal once the next hop has it.

Spans of traces a scorer may sample also feed the intake's bounded `TraceCollector`: an agent
span's scorers get the tool calls and context recorded by the spans of its trace that arrived
before it (or with it). An agent span without content of its own is read from the LLM calls
below it; when they have not all arrived yet it is journaled and waits for them in the intake's
`LlmWait`, at most `trace.llm_wait_s`, then goes on unscored (reason `no_llm_calls`). Agent
spans of a trace a run-scope scorer samples wait for the run's quiet period first (`_run_scope`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracescore._exceptions import ConfigurationError
from tracescore.gateway import _otlp
from tracescore.gateway._agent_spans import AgentSpans, Found
from tracescore.gateway._journal import HELD, Entry, Journal
from tracescore.gateway._metrics import GatewayMetrics
from tracescore.gateway._outbound import Item, Outbound, Output
from tracescore.gateway._run_scope import Arrival, RunScope
from tracescore.instrument._calls import AgentCall
from tracescore.online.core import (
    FLUSH,
    HELD_OVERFLOW,
    NO_LLM_CALLS,
    RANDOMNESS_MASK,
    SHUTDOWN,
    EventPayload,
    OnlineMetrics,
    OnlineScorer,
    ProcessorOptions,
    ScoringCore,
    as_conversation_options,
    as_online_scorers,
)
from tracescore.online.intake import (
    EMPTY,
    AgentReader,
    ContentlessAgent,
    LlmWait,
    LogContent,
    RecognisedCall,
    TraceCollector,
    TraceInput,
    Waiting,
    attributes_of,
    collector_from,
)

_log = logging.getLogger("tracescore.gateway")

# why a span that could not wait for its LLM calls goes on unscored (`LlmWait.wait`)
_NOT_WAITING = {LlmWait.CLOSED: SHUTDOWN, LlmWait.NO_WAIT: NO_LLM_CALLS,
                LlmWait.FULL: HELD_OVERFLOW}


class Engine:
    """Routes requests (agent spans found by `AgentSpans` are held, the rest goes on through
    `Outbound`), scores the held spans with the core and keeps the hold table."""

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
        self._keep = keep  # rescore: which of a span's chosen scorers still score it
        self.traces: TraceCollector = collector_from(trace_options)
        self.log_content = LogContent()  # GenAI content log records, by span (`content_logged`)
        self._spans = AgentSpans(AgentReader(tuple(recognisers)), self.traces, self.log_content,
                                 metrics)
        self._out = Outbound(output, metrics, journal, send_inline=send_inline,
                             max_request_bytes=max_request_bytes)
        self._journal = journal
        self._metrics = metrics
        self._pass_through = pass_through  # False: only agent spans come out (rescore)
        self.offered = 0  # agent spans offered for scoring
        self._lock = threading.Lock()
        # agent spans inside the core: key -> (journal row or None, one-span request)
        self._held: dict[_otlp.SpanKey, Item] = {}
        online = as_online_scorers(scorers)
        if not online:
            raise ConfigurationError("ScoringSpanProcessor needs at least one scorer")
        options = ProcessorOptions(**dict(processor_options or {}))
        # agent spans without content waiting for their LLM calls
        self._waits: LlmWait[Item] = LlmWait(self.traces, max_waiting=options.max_held_spans,
                                             expired=self._expired)
        out = self._out
        self.core = ScoringCore(online, options, export=self._finished, carrier=out.carrier,
                                trace_limits=self.traces.limits,
                                metrics=OnlineMetrics(meter_provider),
                                logger_provider=logger_provider,
                                conversations=as_conversation_options(conversations),
                                conversation_carrier=out.conversation_carrier,
                                turn_store=journal, judge_spans=out.judge_spans)
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
        return len(self._held) + len(self._waits)

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
        found, touched = self._spans.find(
            request, raw, threshold=self._threshold, held=self._held, waiting=self._waits,
            touch=None if self._runs is None else self._runs.touch)
        if touched:
            self._resume(touched)
        if count is None:
            count = _otlp.count_spans(request)
        if not self._pass_through:
            if found:
                self._hold(found)
            return count
        if not found:
            self._out.pass_on(request, raw, count)
            return count
        singles = self._hold(found, offer=False)
        for scope_spans, index in sorted(((f[1], f[3]) for f in found),
                                         key=lambda pair: -pair[1]):
            del scope_spans.spans[index]
        rows = self._out.with_held([single.SerializeToString() for single, _, _ in singles],
                                   request if count > len(found) else None)
        for (single, call, trace), row in zip(singles, rows):
            self._offer(row, single, call, trace)
        return count

    def _hold(self, found: list[Found], offer: bool = True
              ) -> list[tuple[ExportTraceServiceRequest, RecognisedCall | ContentlessAgent,
                              TraceInput]]:
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
                self._out.put((entry.id,), entry.body, entry.count)
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
        for entry in self._waits.drain():
            self._settle_waiting(entry, NO_LLM_CALLS)

    def shutdown(self, timeout_s: float) -> None:
        """Bounded wait for scoring, then every held span goes out (unscored ones with a reason)."""
        for entry in self._waits.close():  # read with what arrived, else unscored
            self._settle_waiting(entry, SHUTDOWN)
        if self._runs is not None and not self.core.closing:  # scored within the wait below
            self._runs.table.release_all(SHUTDOWN)
        if self.core.closing:
            return
        wait = min(self.core.options.shutdown_timeout_s, max(0.0, timeout_s) * 0.8)
        self.core.close(wait)
        self.core.stop_isolation(wait)

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
            duplicate = key in self._held  # the same span twice at once (a sender's retry)
            if not duplicate:
                self._held[key] = (row, single)
                self.offered += 1
        if duplicate:  # forwarded as it came
            self._out.forward(row, single)
            return
        if self._score(key, span, (row, single), call, trace):
            self._metrics.add("held")

    def _score(self, key: _otlp.SpanKey, span: Any, item: Item, call: RecognisedCall,
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
        self._offer(entry.id, single, self._spans.read_held(_otlp.only_span(single)))

    def _finished(self, item: Item, events: Sequence[EventPayload]) -> None:
        """A span back from the core, with the events that landed on it: it goes on."""
        with self._lock:
            self._held.pop(_otlp.key_of(_otlp.only_span(item[1])), None)
        self._out.finished(item, events)

    def _unscored(self, row: int | None, single: ExportTraceServiceRequest,
                  agent: ContentlessAgent, reason: str) -> None:
        """Forward an agent span that cannot be read, with an 'unscored' event per scorer that
        would have sampled it (trace id, `agents` and `attributes` filters), each counted as
        dropped with `reason`."""
        span = _otlp.only_span(single)
        key = _otlp.key_of(span)
        with self._lock:
            duplicate = key in self._held  # already on its way
            if not duplicate:
                self._held[key] = (row, single)
        if duplicate:
            self._out.forward(row, single)
            return
        scorers: dict[str, OnlineScorer] = {}
        with self._guard_offer:
            scorers = self.core.would_sample(key[0] & RANDOMNESS_MASK, agent.agent,
                                             attributes_of(span.attributes))
        self.core.unscored((row, single), scorers, reason, agent.agent)

    # --- agent spans without content, waiting for their LLM calls (the intake's `LlmWait`) ----
    def _wait(self, row: int | None, single: ExportTraceServiceRequest,
              agent: ContentlessAgent) -> None:
        """Keep a journaled agent span until its LLM calls arrive (`trace.llm_wait_s`)."""
        key = _otlp.key_of(_otlp.only_span(single))
        with self._lock:
            duplicate = key in self._held
        outcome = LlmWait.DUPLICATE if duplicate else self._waits.wait(key, (row, single), agent)
        if outcome == LlmWait.DUPLICATE:  # the same span twice at once (a sender's retry)
            self._out.forward(row, single)
        elif outcome == LlmWait.WAITING:
            self._metrics.add("llm_wait")
            if self.log_content.events(*key):  # its content was logged since it was read
                self.content_logged({key})
        else:
            if outcome == LlmWait.NO_WAIT:
                self._spans.unreadable(agent, _otlp.only_span(single))
            self._unscored(row, single, agent, _NOT_WAITING[outcome])

    def _resume(self, trace_ids: set[int]) -> None:
        """Offer the waiting agent spans of `trace_ids` whose LLM calls have now arrived."""
        for entry, call in self._waits.arrived(trace_ids):
            self._offer(*entry.item, call, self.traces.input_of(*entry.key))

    def content_logged(self, keys: set[_otlp.SpanKey]) -> None:
        """Offer the waiting agent spans of `keys` that their content log records now read, and
        those waiting for model calls of `keys` whose messages were logged after them."""
        calls = self.log_content.logged_calls(keys)
        for (trace_id, span_id), parent_id, model_call in calls:
            self.traces.add(trace_id, span_id, parent_id, None, model_call)
        if calls:
            self._resume({trace_id for (trace_id, _), _, _ in calls})
        read = self._spans.read_logged
        for entry, call in self._waits.take(keys, lambda e: read(_otlp.only_span(e.item[1]))):
            self._offer(*entry.item, call, self.traces.input_of(*entry.key))

    def _expired(self, entry: Waiting[Item]) -> None:
        self._settle_waiting(entry, NO_LLM_CALLS)

    def _settle_waiting(self, entry: Waiting[Item], reason: str) -> None:
        """A wait that ended: offered with the LLM calls that arrived, else unscored; never
        raises (the timer thread must outlive any span)."""
        row, single = entry.item
        try:
            call = self._waits.read(entry)
            if call is not None:
                self._offer(row, single, call, self.traces.input_of(*entry.key))
                return
            if self._waits.only_agents_below(entry):  # no agent call of its own
                self._out.forward(row, single)
                return
            if reason == NO_LLM_CALLS:
                self._metrics.add("llm_wait_expired")
                self._spans.unreadable(entry.agent, _otlp.only_span(single))
            self._unscored(row, single, entry.agent, reason)
        except Exception:  # noqa: BLE001 - the span goes on as it came, whatever happens
            _log.warning("tracescore: could not settle a waiting agent span", exc_info=True)
            with self._lock:  # unless the processor has it already
                held = entry.key in self._held
            if not held:
                self._out.forward(row, single)
