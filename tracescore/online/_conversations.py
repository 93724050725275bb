"""Conversation scope: a scorer whose `scope` is "conversation" judges every turn (agent call)
that shares a conversation id, after the conversation has been quiet for a while.

The front door offers each finished agent call (`offer`: one attribute lookup and a deque
append, the only work on the agent's thread; the gateway also journals the turn there, before
the request is acknowledged). The core's timer drains the offers (`expire`), keeps the turns
of each conversation, and lets a conversation be scored:

- once nothing arrived for it for `quiet_s` (a `QuietTable` of the turns not yet scored);
- at once when `max_turns` turns arrived since its last scoring (the turn limit);
- when it is older than `max_age_s`, or pushed out by `max_conversations` / `max_bytes`
  (scored early rather than lost), and at shutdown when nothing keeps the turns (in process).

A turn is one trace's agent call: when several agent calls of one trace carry the id (a
workflow around an agent, sub-agents under a session context), the one that ended last, the
outermost, is the turn.

A scored conversation keeps its turns (bounded the same way, oldest forgotten first, counted)
so that a new turn makes a new, longer version: each result says how many turns it saw and
which were the first and last, and results are appended, never overwritten. Sampling is by the
conversation id (the same decision for every turn, in every process); the `agents`,
`attributes` and predicate filters pick the turns a scorer sees; rate limits and budgets are
taken when a version is scored. A `store` (the gateway's journal) keeps the turns across
restarts until they are let go and their last version delivered (`_turn_ledger`). One
conversation alone over `max_bytes` is scored early and let go. Nothing here runs when no scorer
has the conversation scope.

(About 500 lines: the options, the turn and the tracker, whose one lock covers the quiet table,
the kept turns and the store's rows; cut apart they would share that lock and its state.)
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import threading
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from tracescore import _semconv as sc
from tracescore._exceptions import ConfigurationError
from tracescore.instrument._calls import AgentCall
from tracescore.online._choose import matches
from tracescore.online._options import OnlineScorer
from tracescore.online._quiet import AGE, OVERFLOW, Group, QuietTable
from tracescore.online._sampling import RANDOMNESS_MASK
from tracescore.online._turn_ledger import Flight, TurnLedger

CONVERSATION = "conversation"
TURN_LIMIT = "turn_limit"
SHUTDOWN = "shutdown"
# where a turn's conversation id is read, in this order (after the user's own keys)
ID_ATTRIBUTES: tuple[str, ...] = (
    sc.GEN_AI_CONVERSATION_ID,  # GenAI semconv (Mastra sets it from its thread id too)
    "session.id",  # OpenInference
    "mastra.metadata.threadId",  # Mastra's thread id
    "traceloop.association.properties.session_id",  # OpenLLMetry's standard association
    "traceloop.association.properties.conversation_id",  # ... and other keys users pick
    "traceloop.association.properties.thread_id",
    "traceloop.association.properties.chat_id",
)


def is_conversation_scoped(online: OnlineScorer) -> bool:
    """Whether `online` judges whole conversations."""
    return getattr(online.scorer, "scope", "call") == CONVERSATION


@dataclass(frozen=True, slots=True)
class ConversationOptions:
    """When conversations are scored and how many are held.

    `quiet_s`: a conversation is scored once no turn arrived for it for this long (5 min);
    `max_turns`: ... or at once when this many turns arrived since its last scoring;
    `max_conversations` / `max_bytes` / `max_age_s`: bounds of what is held (the oldest
    conversations are scored early, or forgotten once scored, and counted);
    `id_attributes`: attributes read for the conversation id before the built-in ones.
    """

    quiet_s: float = 300.0
    max_turns: int = 50
    max_conversations: int = 10_000
    max_bytes: int = 64 * 1024 * 1024
    max_age_s: float = 24 * 3600.0
    id_attributes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("quiet_s", "max_age_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ConfigurationError(f"conversations.{name} must be a number > 0, "
                                         f"got {value!r}")
        for name in ("max_turns", "max_conversations", "max_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"conversations.{name} must be an integer >= 1, "
                                         f"got {value!r}")
        keys = self.id_attributes
        if isinstance(keys, str) or not all(isinstance(k, str) and k for k in keys):
            raise ConfigurationError(f"conversations.id_attributes must be a list of attribute "
                                     f"names, got {keys!r}")
        object.__setattr__(self, "id_attributes", tuple(keys))


def as_conversation_options(value: ConversationOptions | Mapping[str, Any] | None
                            ) -> ConversationOptions:
    """Options from an object, a mapping of its fields (a YAML section) or None (defaults)."""
    if value is None:
        return ConversationOptions()
    if isinstance(value, ConversationOptions):
        return value
    if not isinstance(value, Mapping):
        raise ConfigurationError(f"conversations must be a mapping, got {value!r}")
    known = set(ConversationOptions.__dataclass_fields__)
    unknown = sorted(set(value) - known)
    if unknown:
        raise ConfigurationError(f"conversations: unknown option(s) {', '.join(unknown)}; "
                                 f"known: {', '.join(sorted(known))}")
    return ConversationOptions(**value)


def conversation_id(attributes: Mapping[str, Any], keys: Sequence[str]) -> str | None:
    """The first non-empty value of `keys` in `attributes`, as a string."""
    for key in keys:
        value = attributes.get(key)
        if value is not None and value != "":
            return str(value)
    return None


def conversation_randomness(conversation: str) -> int:
    """56 bits of the conversation id's hash: its sampling decision, the same everywhere."""
    digest = hashlib.blake2b(conversation.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") & RANDOMNESS_MASK


@dataclass(frozen=True, slots=True)
class Turn:
    """One agent call of a conversation, as held."""

    input: Any
    output: Any
    agent: str | None
    trace_id: int
    span_id: int
    end_ns: int
    scorers: frozenset[str]  # the conversation scorers whose filters take this turn
    size: int
    row: int = field(default=0, compare=False)  # its row in the store (0: none)

    def to_dict(self) -> dict[str, Any]:
        return {"input": self.input, "output": self.output, "agent": self.agent,
                "trace_id": self.trace_id, "span_id": self.span_id, "end_ns": self.end_ns,
                "scorers": sorted(self.scorers)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Turn:
        return cls(data["input"], data["output"], data["agent"], int(data["trace_id"]),
                   int(data["span_id"]), int(data["end_ns"]), frozenset(data["scorers"]),
                   _size(data["input"], data["output"]), int(data.get("row") or 0))


@dataclass(frozen=True, slots=True)
class Version:
    """A conversation as scored: its id, every turn so far, why it was let go now."""

    conversation: str
    turns: tuple[Turn, ...]
    reason: str
    # with a store: lands (its turns marked scored) once every job of it delivered
    flight: Flight | None = field(default=None, compare=False)
    missing: int = 0  # turns of the conversation this version lacks (dropped, let go)


class TurnStore(Protocol):
    """Where turns are kept across restarts (the gateway's journal): `add_turn` gives the
    turn's row; `settle` marks rows scored and deletes rows let go."""

    def add_turn(self, conversation: str, turn: Mapping[str, Any]) -> int: ...

    def settle(self, scored: Iterable[int], drop: Iterable[int]) -> None: ...


@dataclass(frozen=True, slots=True)
class _Light:
    """What a turn keeps of an agent call when no filter needs the rest."""

    input: Any
    output: Any
    name: str | None


@dataclass(slots=True)
class _Kept:
    turns: list[Turn]
    scored: int  # turns the last version saw
    created: float
    bytes: int


class ConversationTracker:
    """Turns by conversation, scored after a quiet period (see the module doc)."""

    def __init__(self, scorers: Sequence[OnlineScorer], options: ConversationOptions, *,
                 score: Callable[[Version, tuple[OnlineScorer, ...]], None],
                 store: TurnStore | None = None, max_pending: int = 10_000,
                 counted: Callable[[str, int], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.scorers = tuple(scorers)
        self.options = options
        self._keys = options.id_attributes + tuple(
            k for k in ID_ATTRIBUTES if k not in options.id_attributes)
        self._score = score
        self._store = store
        self.ledger = TurnLedger(store, lambda: self._count("store_failed")) if store else None
        self._clock = clock
        self._offers: deque[tuple[str, Any]] = deque()  # (id, Turn or what makes one)
        # every scorer's id when none has a filter (then a turn needs only input and output)
        self._unfiltered = (frozenset(o.scorer_id for o in self.scorers)
                            if not any(o.filtered for o in self.scorers) else None)
        self._max_pending = max_pending
        # turns not scored yet, in a quiet table; scored conversations' turns in `_kept`
        self._table: QuietTable[Turn] = QuietTable(
            quiet_s=options.quiet_s, deliver=self._due, max_groups=options.max_conversations,
            max_bytes=options.max_bytes, max_age_s=options.max_age_s, clock=clock)
        self._kept: OrderedDict[str, _Kept] = OrderedDict()  # oldest first
        self._kept_bytes = 0
        self._seen: dict[str, set[tuple[int, int]]] = {}  # turn ids held (a replay repeats them)
        # turns lost to a conversation's results (dropped unheld, or let go by a bound), newest
        # conversations kept; bounded like the conversations themselves
        self._missing: OrderedDict[str, int] = OrderedDict()
        self._missing_lock = threading.Lock()  # offers drop on the agents' threads
        self._lock = threading.RLock()  # the timer thread and flush/shutdown
        self.counts: Counter[str] = Counter()
        self._counted = counted  # each count also goes to the metrics

    def _count(self, key: str, n: int = 1) -> None:
        self.counts[key] += n
        if self._counted is not None:
            self._counted(key, n)

    # --- the agent's / request's thread -------------------------------------------------------
    def id_of(self, attributes: Mapping[str, Any]) -> str | None:
        return conversation_id(attributes, self._keys)

    def offer(self, call: AgentCall, attributes: Mapping[str, Any], trace_id: int,
              span_id: int, end_ns: int | None = None) -> None:
        """A finished agent call (`end_ns`: its span's end, default now): a turn when it
        carries a conversation id. Never raises."""
        try:
            ended = end_ns or time.time_ns()
            conversation = conversation_id(attributes, self._keys)
            if conversation is None:
                return
            if len(self._offers) >= self._max_pending:
                self._count("dropped.queue_full")
                self._note_missing(conversation, 1)
                return
            if self._store is not None:  # kept before the request is acknowledged
                if not self._sampled(conversation):
                    return
                turn = self._turn(call, trace_id, span_id, ended)
                if turn is not None:
                    row = self._store.add_turn(conversation, turn.to_dict())
                    self._offers.append((conversation, dataclasses.replace(turn, row=row)))
                return
            kept: AgentCall | _Light = call
            if self._unfiltered is not None:  # the call (and its span) is not kept alive
                kept = _Light(call.input, call.output, call.name)
            self._offers.append((conversation, (kept, trace_id, span_id, ended)))
        except Exception:  # noqa: BLE001 - telemetry never raises into the agent
            self._count("dropped.unreadable")

    def _note_missing(self, conversation: str, turns: int) -> None:
        """`turns` of `conversation` will be in none of its results: each result says so."""
        with self._missing_lock:
            self._missing[conversation] = self._missing.get(conversation, 0) + turns
            self._missing.move_to_end(conversation)
            while len(self._missing) > self.options.max_conversations:
                self._missing.popitem(last=False)

    # --- the core's timer ---------------------------------------------------------------------
    def expire(self) -> None:
        """Take the offered turns, then score what is quiet, at its limit or too old."""
        with self._lock, self._gathering():
            self._drain()
            self._table.expire()
            self._forget_old()

    @contextlib.contextmanager
    def _gathering(self) -> Iterator[None]:
        """The store's writes of what happens inside, in one transaction at the end."""
        ledger = self.ledger
        if ledger is not None:
            ledger.gathering = True
        try:
            yield
        finally:
            if ledger is not None:
                ledger.gathering = False
                ledger.write()

    def _release(self, rows: Iterable[int]) -> None:
        """Rows of turns let go: deleted once no version under way holds them (`expire`)."""
        if self.ledger is not None:
            self.ledger.release(rows)

    def _drain(self) -> None:
        offers = self._offers
        unsampled = 0
        while offers:
            conversation, offered = offers.popleft()
            if not self._sampled(conversation):  # no scorer samples it: nothing held
                unsampled += 1
                continue
            turn = offered if isinstance(offered, Turn) else self._turn(*offered)
            if turn is not None:
                self._add(conversation, turn)
        if unsampled:
            self._count("turns.unsampled", unsampled)

    def _turn(self, call: AgentCall | _Light, trace_id: int, span_id: int, end_ns: int
              ) -> Turn | None:
        """The turn of an agent call, None when no conversation scorer's filters take it."""
        scorers = self._unfiltered or frozenset(
            o.scorer_id for o in self.scorers
            if not o.filtered or matches(o, call, _no_log))  # type: ignore[arg-type]
        if not scorers:
            self._count("turns.filtered")
            return None
        return Turn(call.input, call.output, call.name, trace_id, span_id, end_ns, scorers,
                    _size(call.input, call.output))

    def _add(self, conversation: str, turn: Turn) -> None:
        seen = self._seen.setdefault(conversation, set())
        ident = (turn.trace_id, turn.span_id)
        if ident in seen:  # the same span again (a sender's retry, a journal replay)
            return self._release((turn.row,))
        seen.add(ident)
        self._count("turns")
        self._table.arrive(conversation, turn, size=turn.size, ready=True)
        # (the table lets go of the oldest conversations itself: counted as versions)
        kept = self._kept.get(conversation)
        pending = len({t.trace_id for t in self._pending(conversation)})
        if pending >= self.options.max_turns:
            self._table.take(conversation, TURN_LIMIT)
        elif kept is not None:
            self._kept.move_to_end(conversation)
        if self._kept_bytes + self._table.bytes > self.options.max_bytes:
            self._bound_kept()  # scored conversations' turns go first
            if (self._kept_bytes + self._table.bytes > self.options.max_bytes
                    and conversation in self._table):  # one conversation over it alone
                self._table.take(conversation, OVERFLOW)

    def _pending(self, conversation: str) -> list[Turn]:
        group = self._table._groups.get(conversation)
        return group.items if group is not None else []

    def _due(self, group: Group[Turn], reason: str) -> None:
        """Turns not scored yet leave the quiet table: score the conversation with them all."""
        conversation = str(group.key)
        self._count(f"versions.{reason}")
        kept = self._kept.pop(conversation, None)
        every = sorted((kept.turns if kept is not None else []) + group.items,
                       key=lambda turn: turn.end_ns)  # in time order
        turns = _one_per_trace(every)
        self._release(_left_out(every, turns))  # inner agent calls: no turns of their own
        self._kept_bytes -= kept.bytes if kept is not None else 0
        with self._missing_lock:
            missing = self._missing.get(conversation, 0)
        flight = self.ledger.launch(t.row for t in turns) if self.ledger is not None else None
        try:
            self._score(Version(conversation, tuple(turns), reason, flight, missing),
                        self._sampled(conversation))
        finally:
            if flight is not None:
                flight.land()  # the guard: lands now unless jobs of it were queued
        size = sum(t.size for t in turns)
        created = kept.created if kept is not None else group.created  # its age: from its start
        self._kept[conversation] = _Kept(turns, len(turns), created, size)
        self._kept_bytes += size
        if reason in (AGE, OVERFLOW):
            self._forget(conversation, reason)  # a bound: its turns go too
        self._bound_kept()

    def _sampled(self, conversation: str) -> tuple[OnlineScorer, ...]:
        """The scorers whose rate takes `conversation` (decided by its id)."""
        randomness = conversation_randomness(conversation)
        return tuple(o for o in self.scorers if randomness >= o.threshold)

    def _bound_kept(self) -> None:
        options = self.options
        while self._kept and (len(self._kept) + len(self._table) > options.max_conversations
                              or self._kept_bytes + self._table.bytes > options.max_bytes):
            self._forget(next(iter(self._kept)), OVERFLOW)

    def _forget_old(self) -> None:
        too_old = self._clock() - self.options.max_age_s
        while self._kept:
            conversation, kept = next(iter(self._kept.items()))
            if kept.created > too_old:
                break
            self._forget(conversation, AGE)

    def _forget(self, conversation: str, reason: str) -> None:
        """A scored conversation's turns go (a later turn starts a new series of versions)."""
        kept = self._kept.pop(conversation, None)
        if kept is not None:
            self._kept_bytes -= kept.bytes
            self._note_missing(conversation, len(kept.turns))  # a later version starts after them
        if conversation not in self._table:
            self._seen.pop(conversation, None)
        self._count(f"forgotten.{reason}")
        if kept is not None:  # turns not scored yet stay
            self._release(t.row for t in kept.turns)

    # --- restart, flush, shutdown ------------------------------------------------------------
    def restore_all(self, kept: Iterable[tuple[str, Iterable[Mapping[str, Any]], int]]) -> None:
        """`restore` each (conversation, turns, scored) a store kept, with one write."""
        with self._lock, self._gathering():
            for conversation, turns, scored in kept:
                self.restore(conversation, turns, scored)

    def restore(self, conversation: str, turns: Iterable[Mapping[str, Any]], scored: int = 0
                ) -> None:
        """Turns a store kept from a previous run: those marked `scored` (or the first `scored`)
        were scored; the rest wait for a quiet period from now."""
        with self._lock:
            read, ids, flags, again = [], set(), {}, []
            for index, data in enumerate(turns):  # a turn replayed before a crash: kept twice
                turn = Turn.from_dict(data)
                ident = (turn.trace_id, turn.span_id)
                if ident in ids:
                    again.append(turn.row)
                    continue
                ids.add(ident)
                read.append(turn)
                flags[ident] = bool(data.get("scored")) or index < scored
            one = _one_per_trace(read)  # as they were when scored
            self._release(again + _left_out(read, one))
            read = one
            old = [t for t in read if flags[(t.trace_id, t.span_id)]]
            new = [t for t in read if not flags[(t.trace_id, t.span_id)]]
            if old:
                size = sum(t.size for t in old)
                self._kept[conversation] = _Kept(old, len(old), self._clock(), size)
                self._kept_bytes += size
                self._seen.setdefault(conversation, set()).update(
                    (t.trace_id, t.span_id) for t in old)
            for turn in new:
                self._add(conversation, turn)
            self._bound_kept()

    def release_all(self) -> None:
        """Score every conversation with turns not scored yet (in-process shutdown)."""
        with self._lock:
            self._drain()
            self._table.release_all(SHUTDOWN)

    def stats(self) -> dict[str, int]:
        counts = {f"conversations.{k}": v for k, v in self.counts.items()}
        counts["conversations.pending"] = len(self._table)
        counts["conversations.kept"] = len(self._kept)
        counts["conversations.bytes"] = self._kept_bytes + self._table.bytes
        if self.ledger is not None:
            counts["conversations.rows_in_flight"] = self.ledger.flying
        return counts


def _one_per_trace(turns: list[Turn]) -> list[Turn]:
    """One turn per trace: the agent call of a trace that ended last (the outermost: a workflow
    or agent span ends after the agent calls inside it, which carry the same id); `turns` in
    the order they ended."""
    last = {t.trace_id: t for t in turns}
    if len(last) == len(turns):
        return turns
    return [t for t in turns if last[t.trace_id] is t]


def _left_out(every: list[Turn], kept: list[Turn]) -> list[int]:
    """Rows of the turns of `every` not in `kept`."""
    taken = {id(t) for t in kept}
    return [t.row for t in every if id(t) not in taken]


def _no_log(*args: object, **kwargs: object) -> None:
    return None


def _size(*values: Any) -> int:
    """A turn's rough size in bytes (its values' text)."""
    return sum(len(v) if isinstance(v, str) else len(repr(v)) for v in values) + 64
