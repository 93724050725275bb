"""`AgentReader`: one reading of agent spans for both front doors.

Built once from a door's recognisers, it answers for a finished span (its name, attributes
and events as its door holds them) with one outcome:

- a `RecognisedCall`: an agent call, read;
- a `ContentlessAgent`: an agent span without content of its own, to be read from the LLM calls
  below it in its trace (`from_trace`; the gateway waits for them a bounded time);
- an `Unreadable`: it looks like an agent call but cannot be read (the door counts it and
  calls `note_unreadable`);
- None: no agent call (the common case, decided on `watched` keys before anything is read).

Then, with the span's trace (`_structure`): `wrapper` (an anonymous agent span without content
under another span: part of the call above it), `structural` (a loop's top span without agent
marker, read from the LLM calls below it), `hollow` (a recognised call whose input holds no
question: read from the LLM calls below it instead) and `unread` (why one that needed its LLM
calls was not read).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from tracescore.online.intake._collector import TraceCollector
from tracescore.online.intake._diagnose import (
    Diagnoser,
    Unreadable,
    answer_of,
    gate_keys,
    question_of,
)
from tracescore.online.intake._event_content import with_event_content
from tracescore.online.intake._generic import generic_call, read_generic
from tracescore.online.intake._llm_calls import ContentlessAgent, contentless_reader, from_llm_calls
from tracescore.online.intake._readers import RecognisedCall, Recogniser
from tracescore.online.intake._recognise import recognise, recogniser_markers
from tracescore.online.intake._shaped import (
    SHAPE_MARKERS,
    agent_like,
    has_content_keys,
    shaped_call,
)
from tracescore.online.intake._structure import candidate, fallback, is_top, miss
from tracescore.online.intake._trace_input import TraceSpans
from tracescore.online.intake._unwrap import unwrap_input, unwrap_output

Outcome = RecognisedCall | ContentlessAgent | Unreadable | None


class AgentReader:
    """The recognise chain, agents without content and the diagnosis, for one door."""

    def __init__(self, recognisers: Sequence[Recogniser]) -> None:
        self.recognisers = tuple(recognisers)
        self.contentless = contentless_reader(self.recognisers)
        self.chain_markers = recogniser_markers(self.recognisers)
        self.markers = self.chain_markers | self.contentless.markers  # keys of spans read
        self.diagnose = Diagnoser(self.recognisers)
        self.watched = self.markers | self.diagnose.keys  # and of spans diagnosed
        # texts of which a request with a model call found by its shape holds one (`_shaped`;
        # only where the chain finds agent calls by the trace's shape)
        self.shape_markers = SHAPE_MARKERS if self.contentless else frozenset()

    def __bool__(self) -> bool:
        return bool(self.recognisers)

    def request_markers(self, item_markers: frozenset[str]) -> frozenset[str]:
        """Texts of which a serialized request holds one when one of its spans is read by this
        reader, diagnosed, found by its shape or records an item (`item_markers`): a request with
        none passes through unread. As few as can be told (`gate_keys`): each is one substring
        search of every request."""
        known = self.chain_markers | item_markers
        gate = frozenset().union(*(gate_keys(r) for r in self.recognisers))
        return shortest(gate | item_markers | self.diagnose.look_keys
                        | self.contentless.raw_markers(known) | self.shape_markers)

    def shaped(self, keys: Iterable[str]) -> bool:
        """Whether a span with these attribute keys may be a model call found by its shape
        (a generic content key; read only where the trace's shape is used): decode it."""
        return bool(self.contentless) and has_content_keys(keys)

    def shaped_call(self, attributes: Mapping[str, Any]) -> bool:
        """Whether a finished span is a model call found by its shape (`_shaped`): in process,
        its trace is then kept until its local root ends (the span above it may be its agent
        call). Cheap for a span without a generic content key."""
        return self.shaped(attributes) and shaped_call(attributes) is not None

    def read(self, name: str, attributes: Mapping[str, Any],
             events: Iterable[tuple[str, Any]] = (),
             decode: Callable[[Any], Mapping[str, Any]] | None = None, *,
             contentless: bool = True) -> tuple[Outcome, Mapping[str, Any]]:
        """(outcome, the attributes read: with the content `events` recorded) for a span whose
        keys meet `watched`; `decode`: how an event's attributes become a mapping (OTLP);
        `contentless`: whether an agent span without content may be read from its LLM calls."""
        if events:
            attributes = with_event_content(attributes, events, decode or dict)
        found: Outcome = None
        if not self.markers.isdisjoint(attributes):
            found = recognise(name, attributes, self.recognisers)
            if found is None and contentless and self.contentless:
                found = self.contentless(name, attributes)
        if found is None:
            found = self.diagnose(name, attributes)
        if isinstance(found, (ContentlessAgent, Unreadable)):  # its content under other keys
            found = read_generic(name, attributes, found) or found
        return found, attributes

    @staticmethod
    def from_trace(traces: TraceCollector, trace: TraceSpans | None, span_id: int,
                   agent: ContentlessAgent) -> RecognisedCall | ContentlessAgent | None:
        """An agent span without content, read from the LLM calls below it in `trace` (kept
        by `traces`: `traces.at(key)`, or what `end_span` returned): the call; `agent` itself
        when they are not there (yet); None when it only contains agent spans (no agent call
        of its own)."""
        read = from_llm_calls(agent, traces.llm_calls_of(trace, span_id))
        if read is not None:
            return read
        return None if traces.agents_below(trace, span_id) else agent

    @staticmethod
    def wrapper(found: Outcome, parent_id: int | None) -> bool:
        """Whether `found` is an anonymous agent span without content under another span: a
        wrapper of one model turn, part of the agent call above it (not scored, not counted,
        not an agent span its LLM calls belong to)."""
        return isinstance(found, ContentlessAgent) and found.anonymous and bool(parent_id)

    def structural(self, traces: TraceCollector, trace: TraceSpans | None, span_id: int,
                   parent_id: int | None, kind: str, name: str, keys: Iterable[str],
                   attributes: Mapping[str, Any] | None = None
                   ) -> ContentlessAgent | RecognisedCall | None:
        """The agent call a span with no agent marker stands for by the trace's shape: the top
        of a loop (a root, or a request's top span) with LLM calls below it that no agent span
        below it owns; None for any other span (cheap when its trace has no LLM calls). When
        every call below it was found by its shape only (`_shaped`), the loop must be one (two
        turns, or a span that says it is an agent) and the span is read from its own generic
        keys when they hold a question and an answer."""
        if trace is None or not trace.llm:
            return None
        if not is_top(parent_id, kind):
            return self.named(traces, trace, span_id, name, keys, attributes)
        own = trace.llm.get(span_id)  # a top span that is a model call itself is no agent call,
        if own is not None and own.reader != "shaped":  # unless only its shape said so
            return None
        calls = [call for call in traces.llm_calls_of(trace, span_id) if call is not own]
        if not calls:
            return None
        if all(call.reader == "shaped" for call in calls):  # no marker anywhere (`_shaped`)
            keys = list(keys)
            if len(calls) < 2 and not agent_like(name, keys):
                return None  # one model turn under a span that does not say it is an agent
            own_content = own_exchange(name, attributes) if attributes else None
            if own_content is not None:
                return own_content  # its own question and answer, under generic keys
        return candidate(name, keys, attributes)

    def named(self, traces: TraceCollector, trace: TraceSpans, span_id: int, name: str,
              keys: Iterable[str], attributes: Mapping[str, Any] | None) -> RecognisedCall | None:
        """The agent call a span inside a larger program stands for (`_structure`): one with no
        key a recogniser or the diagnosis looks at that says it is an agent (`agent_named`), is
        no model call itself, has LLM calls below it that no agent span below it owns, and
        records a question and an answer of its own under generic keys; None for any other span
        (a step wrapper of one turn records none; a convention's span keeps its rules)."""
        if attributes is None or span_id in trace.llm or not self.agent_named(name, keys):
            return None
        if not traces.llm_calls_of(trace, span_id):
            return None
        own = own_exchange(name, attributes)
        if own is not None:
            return own
        return None

    def agent_named(self, name: str, keys: Iterable[str]) -> bool:
        """Whether a span below its loop's top is to be looked at by the trace's shape (`named`):
        where shapes are read, it has no key the recognisers or the diagnosis look at, and says it
        is an agent. Cheap: set and substring tests of its name and keys."""
        return bool(self.contentless) and agent_like(name, keys) and self.watched.isdisjoint(keys)

    @staticmethod
    def unreadable_with_calls(traces: TraceCollector, trace: TraceSpans | None, span_id: int,
                              found: Outcome, name: str, attributes: Mapping[str, Any]
                              ) -> ContentlessAgent | None:
        """An agent span its reader could not read that has LLM calls below it (no agent span
        below it owns), as an agent to read from them; None otherwise."""
        if not isinstance(found, Unreadable) or trace is None or not trace.llm:
            return None
        if not traces.llm_calls_of(trace, span_id):
            return None
        return fallback(found, name, attributes)

    @staticmethod
    def held(found: Outcome, name: str, attributes: Mapping[str, Any]
             ) -> RecognisedCall | ContentlessAgent:
        """An agent span held before a restart that its markers do not read: it was found by
        the trace's shape (read from its own generic keys when they hold a question and an
        answer), or read from its LLM calls (which are gone: it waits for them)."""
        if isinstance(found, Unreadable):
            return fallback(found, name, attributes)
        if isinstance(found, ContentlessAgent):
            return found
        own = own_exchange(name, attributes)
        if own is not None:
            return own
        return candidate(name, attributes, attributes)

    @staticmethod
    def hollow(found: Outcome) -> ContentlessAgent | None:
        """A recognised call whose input holds no question text (`gen_ai.input.messages`
        recorded empty, `input.value` ""...), as an agent to read from its LLM calls."""
        if not isinstance(found, RecognisedCall):
            return None
        value = found.input
        if isinstance(value, str) and value.strip():
            return None  # the common case: the question as text
        if question_of(value):
            return None
        return ContentlessAgent(found.convention, found.agent, found.ground_truth)

    def unread(self, agent: ContentlessAgent, name: str, attributes: Mapping[str, Any]
               ) -> Unreadable | None:
        """Why an agent read from its LLM calls was not read (they hold no text, or never
        came)."""
        if agent.structural:
            return miss(agent, name)
        return self.diagnose(name, attributes)

    def settle(self, traces: TraceCollector, trace: TraceSpans, span_id: int,
               parent_id: int | None, kind: str, name: str, found: Outcome,
               attributes: Mapping[str, Any]) -> Outcome:
        """What a span that `read` answered `found` for is, once every span below it is in
        `trace` (in process: they ended before it): the call (read from its LLM calls where it
        has to be), an `Unreadable` to count, or None (no agent call of its own: a wrapper of a
        model turn, a span that only wraps agent spans, any other span). Marks an agent call in
        `trace` (the LLM calls below it are its own)."""
        if self.wrapper(found, parent_id):
            return None
        if (found is None or isinstance(found, Unreadable)) and self.contentless:
            found = (self.unreadable_with_calls(traces, trace, span_id, found, name, attributes)
                     or self.structural(traces, trace, span_id, parent_id, kind, name,
                                        attributes, attributes) or found)
        recorded = found
        hollow = self.hollow(found)
        if hollow is not None and traces.llm_calls_of(trace, span_id):
            found = hollow  # its input holds no question: read from its LLM calls
        if isinstance(found, (RecognisedCall, ContentlessAgent)):
            traces.mark_agent(trace, span_id)
        if isinstance(found, ContentlessAgent):
            agent = found
            found = self.from_trace(traces, trace, span_id, agent)
            if isinstance(found, ContentlessAgent):  # its LLM calls are not here, or no text
                found = recorded if hollow is not None else self.unread(agent, name, attributes)
        if isinstance(found, Unreadable) and traces.agents_below(trace, span_id):
            return None  # it only wraps agent spans: no call of its own
        return found


def own_exchange(name: str, attributes: Mapping[str, Any]) -> RecognisedCall | None:
    """The call a span records under generic keys when they hold a question and an answer."""
    own = generic_call(name, attributes, convention="unknown")
    if own and question_of(unwrap_input(own.input)) and answer_of(unwrap_output(own.output)):
        return own
    return None


def shortest(texts: frozenset[str]) -> frozenset[str]:
    """`texts` without those that contain another of them: a text holding the longer one holds
    the shorter, so searching the shorter alone finds the same requests."""
    return frozenset(t for t in texts if not any(o != t and o in t for o in texts))
