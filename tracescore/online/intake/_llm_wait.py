"""`LlmWait`: agent spans without content of their own, waiting for the LLM calls below them.

A door whose spans arrive in any order (the gateway: a trace's spans come in several requests)
may read an agent span before its LLM calls are in the `TraceCollector`. It parks the span here,
with whatever it needs to send it on (`item`), for at most `BufferLimits.llm_wait_s` and with at
most `max_waiting` spans at once. Then, as spans arrive:

- `arrived(trace_ids)` takes the waiting spans of those traces whose LLM calls now read
  (`from_llm_calls`), each with its call, for the door to score;
- `take(keys, read)` takes those the door can now read some other way (content log records);
- a wait that runs out is handed, on the wait's own timer thread, to `expired(entry)`;
  `drain()` (the input is complete) and `close()` (shutdown) hand back all of them at once.

A span taken by one of these is taken once: a wait that ended meanwhile is not handed out
twice. In process no span waits: an agent span ends after the spans below it, so its LLM calls
are in its trace when it is read (`AgentReader.settle`). Thread-safe.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

from tracescore._guard import GUARD
from tracescore.online.intake._collector import TraceCollector
from tracescore.online.intake._llm_calls import ContentlessAgent, from_llm_calls
from tracescore.online.intake._readers import RecognisedCall

T = TypeVar("T")
SpanKey = tuple[int, int]  # (trace id, span id)


@dataclass(slots=True)
class Waiting(Generic[T]):
    """One agent span waiting: its key, what the door sends on, and the agent to read."""

    key: SpanKey
    item: T
    agent: ContentlessAgent
    deadline: float  # `time.monotonic()` when its wait runs out


class LlmWait(Generic[T]):
    """Agent spans waiting, in deadline order, for their LLM calls in `traces`."""

    # what `wait` answers
    WAITING = "waiting"  # parked until its LLM calls arrive or its wait runs out
    DUPLICATE = "duplicate"  # the same span waits already (a sender's retry)
    NO_WAIT = "no_wait"  # `llm_wait_s` is 0: its LLM calls are not waited for
    FULL = "full"  # `max_waiting` spans wait already
    CLOSED = "closed"  # the wait was closed (shutdown)

    def __init__(self, traces: TraceCollector, *, max_waiting: int,
                 expired: Callable[[Waiting[T]], None]) -> None:
        self.traces = traces
        self._max = max_waiting
        self._expired = expired  # called on the timer thread for each wait that ran out
        self._settling = GUARD.site("llm_wait", "tracescore: could not settle a waiting agent span")
        self._waiting: dict[SpanKey, Waiting[T]] = {}  # insertion order is deadline order
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._timer: threading.Thread | None = None
        self._closed = False

    def __len__(self) -> int:
        return len(self._waiting)

    def __bool__(self) -> bool:
        return bool(self._waiting)

    def __contains__(self, key: object) -> bool:
        return key in self._waiting

    def wait(self, key: SpanKey, item: T, agent: ContentlessAgent) -> str:
        """Park `item` until its LLM calls arrive (`WAITING`), or say why not."""
        wait_s = self.traces.bounds.llm_wait_s
        with self._lock:
            if key in self._waiting:
                return self.DUPLICATE
            if self._closed:
                return self.CLOSED
            if wait_s <= 0:
                return self.NO_WAIT
            if len(self._waiting) >= self._max:
                return self.FULL
            self._waiting[key] = Waiting(key, item, agent, time.monotonic() + wait_s)
            self._changed.notify_all()
            if self._timer is None:
                self._timer = threading.Thread(target=self._expire, daemon=True,
                                               name="tracescore-llm-wait")
                self._timer.start()
        return self.WAITING

    def read(self, entry: Waiting[T]) -> RecognisedCall | None:
        """`entry`'s agent call read from the LLM calls below it so far (None: not yet)."""
        return from_llm_calls(entry.agent, self.traces.llm_calls_of(*self.traces.at(entry.key)))

    def only_agents_below(self, entry: Waiting[T]) -> bool:
        """Whether `entry` only contains other agent spans (no agent call of its own)."""
        return self.traces.agents_below(*self.traces.at(entry.key))

    def arrived(self, trace_ids: Iterable[int]) -> list[tuple[Waiting[T], RecognisedCall]]:
        """Take the waiting spans of `trace_ids` whose LLM calls now read, with their calls."""
        traces = set(trace_ids)
        with self._lock:
            candidates = [entry for key, entry in self._waiting.items() if key[0] in traces]
        return self._take((entry, self.read(entry)) for entry in candidates)

    def take(self, keys: Iterable[SpanKey], read: Callable[[Waiting[T]], RecognisedCall | None]
             ) -> list[tuple[Waiting[T], RecognisedCall]]:
        """Take the waiting spans of `keys` that `read` now reads, with their calls."""
        with self._lock:
            candidates = [self._waiting[key] for key in keys if key in self._waiting]
        return self._take((entry, read(entry)) for entry in candidates)

    def _take(self, read: Iterable[tuple[Waiting[T], RecognisedCall | None]]
              ) -> list[tuple[Waiting[T], RecognisedCall]]:
        taken = []
        for entry, call in read:
            if call is None:
                continue
            with self._lock:
                if self._waiting.pop(entry.key, None) is None:
                    continue  # its wait ended meanwhile
            taken.append((entry, call))
        return taken

    def drain(self) -> list[Waiting[T]]:
        """Take every waiting span (the input is complete: no more LLM calls will come)."""
        with self._lock:
            waiting = list(self._waiting.values())
            self._waiting.clear()
        return waiting

    def close(self) -> list[Waiting[T]]:
        """Stop waiting (no span is parked from now on) and take every waiting span."""
        with self._lock:
            self._closed = True
            self._changed.notify_all()
        return self.drain()

    def _expire(self) -> None:
        """The timer thread: waits that ran out go to `expired`, which must not raise."""
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
                    self._changed.wait(None if first is None else first.deadline - now)
                    continue
            for entry in taken:
                with self._settling:  # the timer thread outlives any span
                    self._expired(entry)
