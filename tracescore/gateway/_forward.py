"""The door behind the gateway: forwards serialized OTLP requests to the next hop (trace
requests; with `signal="logs"`, log requests, counted under `logs_*` and never split).

Requests queue in memory (their journal rows stay until the next hop acknowledges them) and
are sent in batches of at most `max_batch_spans` spans and `max_batch_bytes` encoded bytes (a
larger request is split, see `_split`) by a few sender threads. Answers are read the way the
Collector's OTLP exporters read them: retryable ones (HTTP 429/502/503/504, gRPC UNAVAILABLE,
DEADLINE_EXCEEDED, ...; RESOURCE_EXHAUSTED only with RetryInfo) are retried with backoff for as
long as it takes (the bounded backlog makes the receivers refuse new data meanwhile); every
other answer is final: counted and logged once per reason, and, on the direct send, passed
back to the sender (`NextHopRejected`) instead of being acknowledged. The senders and how an
answer reads are in `_senders`.
"""

from __future__ import annotations

import logging
import queue
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)

from tracescore._guard import Guard
from tracescore.gateway._journal import Journal, LogRows
from tracescore.gateway._metrics import GatewayMetrics
from tracescore.gateway._senders import NextHopRejected, Outcome, Sender
from tracescore.gateway._split import Undeliverable, split_request

__all__ = ["DEFAULT_MAX_BATCH_BYTES", "INLINE_TIMEOUT_S", "Forwarder"]

_log = logging.getLogger("tracescore.gateway")

INLINE_TIMEOUT_S = 1.0  # longest a receiving thread waits for a direct send (then journals it)
DEFAULT_MAX_BATCH_BYTES = 3584 << 10  # 3.5 MiB: under the Collector's 4 MiB gRPC default


class _Group:
    """The parts of one journaled request split to fit: its rows go once every part is sent."""

    __slots__ = ("ids", "left")

    def __init__(self, ids: tuple[int, ...], left: int) -> None:
        self.ids = ids
        self.left = left


@dataclass(slots=True)
class _Item:
    ids: tuple[int, ...]
    body: bytes
    count: int
    group: _Group | None = None


class _Latch:
    """A one-shot event on a bare lock: `threading.Event`'s condition costs Python calls on both
    sides of every direct send, this costs one C call each."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()

    def set(self) -> None:
        """Once only."""
        self._lock.release()

    def wait(self, timeout_s: float | None = None) -> bool:
        if not self._lock.acquire(timeout=-1 if timeout_s is None else timeout_s):
            return False
        self._lock.release()  # stays set for any later wait
        return True


class _Direct:
    """One direct send under way: who owns its outcome once the receiving thread stops waiting."""

    __slots__ = ("adopted", "body", "count", "done", "ids", "outcome")

    def __init__(self, body: bytes, count: int) -> None:
        self.body = body
        self.count = count
        self.done = _Latch()
        self.ids: tuple[int, ...] | None = None  # journal rows, once adopted
        self.adopted = False
        self.outcome: Outcome | None = None


class Forwarder:
    """Batches queued requests and sends them with retries; removes their journal rows once sent."""

    def __init__(self, sender: Sender, journal: Journal | LogRows | None, metrics: GatewayMetrics, *,
                 max_batch_spans: int = 8192, max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
                 workers: int = 2, max_backoff_s: float = 5.0, stuck_after_s: float = 300.0,
                 signal: str = "traces") -> None:
        self._sender = sender
        self._prefix = "" if signal == "traces" else f"{signal}_"  # counter names
        self._split = signal == "traces"  # a log request goes on whole, whatever its size
        self._journal = journal
        self._metrics = metrics
        self._max_batch = max_batch_spans
        self.max_batch_bytes = max_batch_bytes
        self._max_backoff = max_backoff_s
        self._stuck_after = stuck_after_s
        self._items: deque[_Item] = deque()
        lock = threading.RLock()
        self._cond = threading.Condition(lock)  # items queued, or stopping: the senders wake
        self._emptied = threading.Condition(lock)  # nothing pending any more: drain() wakes
        self._pending = 0  # spans queued or being sent
        self._stopping = False
        named = "forward" if signal == "traces" else f"forward-{signal}"
        self._threads = [threading.Thread(target=self._run, name=f"tracescore-{named}-{i}",
                                          daemon=True) for i in range(workers)]
        self._directs: queue.SimpleQueue[_Direct | None] = queue.SimpleQueue()
        self._threads.append(threading.Thread(target=self._run_direct, daemon=True,
                                              name=f"tracescore-{named}-direct"))
        self._started = False
        self._down = False  # the next hop is failing (for readiness)
        self._inline = False  # a direct send is under way
        self._last_success = time.monotonic()
        self._pending_since: float | None = None  # when the backlog last went from empty
        self._guard = Guard(_log)  # final rejections are logged once per reason

    @property
    def pending(self) -> int:
        """Spans accepted and not yet acknowledged by the next hop."""
        return self._pending

    @property
    def next_hop_down(self) -> bool:
        return self._down

    def stuck_for(self) -> float | None:
        """Seconds forwarding has made no progress while spans wait, once that is longer than
        `stuck_after_s` (None: not stuck)."""
        since = self._pending_since
        if since is None or not self._pending:
            return None
        idle = time.monotonic() - max(since, self._last_success)
        return idle if idle > self._stuck_after else None

    def start(self) -> None:
        if not self._started:
            self._started = True
            for thread in self._threads:
                thread.start()

    def put(self, ids: tuple[int, ...], body: bytes, count: int) -> None:
        """Queue one serialized ExportTraceServiceRequest (never blocks); one over
        `max_batch_bytes` is split, and its journal rows go once every part is sent."""
        if self._split and len(body) > self.max_batch_bytes:
            self._put_split(ids, body, count)
            return
        with self._cond:
            self._add(_Item(ids, body, count))

    def send_inline(self, body: bytes, count: int,
                    journal: Callable[[], tuple[int, ...]] | None = None) -> bool:
        """Send on behalf of a receiving thread when nothing is queued or being sent this way,
        the next hop is healthy and the request fits one batch. True: the next hop has it, or
        the send is still under way after `INLINE_TIMEOUT_S` and `journal()` has stored it (the
        send then owns those rows: removed when it succeeds, queued when it fails), so the caller
        may acknowledge. `NextHopRejected`: the next hop refused it for good. False (busy, or a
        retryable failure): the caller journals and `put`s it as usual."""
        with self._cond:
            if (self._items or self._inline or self._down or self._stopping or not self._started
                    or len(body) > self.max_batch_bytes or count > self._max_batch):
                return False
            self._inline = True
            self._grow(count)
        direct = _Direct(body, count)
        self._directs.put(direct)
        if not direct.done.wait(INLINE_TIMEOUT_S) and journal is not None:
            ids = journal()  # raises (disk full): the caller refuses; the send goes on unowned
            with self._cond:
                if direct.outcome is None:  # still under way: it owns the rows now
                    direct.ids, direct.adopted = ids, True
                    return True
            if direct.outcome is not None and direct.outcome.ok:
                self._remove(ids)  # it finished meanwhile: nothing left to own
                return True
            if direct.outcome is not None and direct.outcome.retry:
                self.put(ids, body, count)
                return True
            self._remove(ids)  # rejected for good: not acknowledged (the caller refuses)
        direct.done.wait()
        outcome = direct.outcome
        assert outcome is not None
        if outcome.ok:
            return True
        if outcome.retry:
            return False
        raise NextHopRejected(outcome)

    def _run_direct(self) -> None:
        """The direct sends (one at a time), with the exporter's full timeout."""
        while (direct := self._directs.get()) is not None:
            self._direct(direct)

    def _direct(self, direct: _Direct) -> None:
        outcome = self._attempt(direct.body)
        with self._cond:
            direct.outcome = outcome
            self._inline = False
            self._shrink(direct.count)
            final = self._settled(outcome, direct.count, passed_back=not direct.adopted)
            adopted, ids = direct.adopted, direct.ids
        direct.done.set()
        if adopted and ids is not None:
            if final:
                self._remove(list(ids))
            else:
                self.put(ids, direct.body, direct.count)

    def drain(self, timeout_s: float) -> bool:
        """Wait (bounded) until everything queued has been sent."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._pending:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._emptied.wait(min(remaining, 0.1))
        return True

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the senders (what is still queued stays in the journal for the next start)."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._directs.put(None)
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            if thread.is_alive():
                thread.join(max(0.0, deadline - time.monotonic()))
        self._sender.close()

    # --- internals ----------------------------------------------------------------------------
    def _grow(self, count: int) -> None:
        if not self._pending:
            self._pending_since = time.monotonic()
        self._pending += count

    def _shrink(self, count: int) -> None:
        """(Holding the lock.) Wakes drain() when nothing is left, not the senders: they wait
        for items, and waking them after every send cost two thread switches a request."""
        self._pending -= count
        if not self._pending:
            self._pending_since = None
            self._emptied.notify_all()

    def _add(self, item: _Item) -> None:
        self._items.append(item)
        self._grow(item.count)
        self._cond.notify()

    def _put_split(self, ids: tuple[int, ...], body: bytes, count: int) -> None:
        try:
            parts = split_request(ExportTraceServiceRequest.FromString(body), self.max_batch_bytes)
        except (Undeliverable, ValueError) as exc:  # acknowledged already: dropped, counted
            self._metrics.add(self._prefix + "dropped_undeliverable", count)
            self._guard.once("undeliverable", "tracescore: %d acknowledged spans cannot fit "
                           "exporter.max_batch_bytes and are dropped (%s)", count, exc)
            self._remove(list(ids))
            return
        if parts.capped:
            self._metrics.add(self._prefix + "capped_for_next_hop", parts.capped)
        group = _Group(ids, len(parts.bodies)) if ids else None
        with self._cond:
            for part, part_count in parts.bodies:
                self._add(_Item((), part, part_count, group))

    def _next_batch(self) -> list[_Item] | None:
        with self._cond:
            while not self._items:
                if self._stopping:
                    return None
                self._cond.wait()
            if self._stopping:
                return None
            batch: list[_Item] = []
            count = size = 0
            while self._items and (not batch or (
                    count + self._items[0].count <= self._max_batch
                    and size + len(self._items[0].body) <= self.max_batch_bytes)):
                item = self._items.popleft()
                batch.append(item)
                count += item.count
                size += len(item.body)
            return batch

    def _run(self) -> None:
        while (batch := self._next_batch()) is not None:
            # concatenated serialized requests are one request with all their resource spans
            body = b"".join(item.body for item in batch)
            count = sum(item.count for item in batch)
            sent = self._send(body, count)
            if sent is None:  # stopping: the rows stay in the journal
                return
            self._done(batch, count)

    def _done(self, batch: list[_Item], count: int) -> None:
        """Spans the next hop answered for good: out of the journal and of the backlog."""
        ids: list[int] = []
        with self._cond:
            for item in batch:
                ids.extend(item.ids)
                if item.group is not None:
                    item.group.left -= 1
                    if not item.group.left:
                        ids.extend(item.group.ids)
        self._remove(ids)
        with self._cond:
            self._shrink(count)

    def _remove(self, ids: list[int] | tuple[int, ...]) -> None:
        if self._journal is not None and ids:
            try:
                self._journal.remove(ids)
            except Exception:  # noqa: BLE001 - a failed delete only means a resend later
                _log.warning("tracescore: could not remove forwarded spans from the journal",
                             exc_info=True)

    def _attempt(self, body: bytes, timeout_s: float | None = None) -> Outcome:
        try:
            return self._sender.send(body, timeout_s)
        except Exception as exc:  # noqa: BLE001 - a sender bug must not kill the thread
            return Outcome(False, retry=True, detail=type(exc).__name__)

    def _settled(self, outcome: Outcome, count: int, *, passed_back: bool = False) -> bool:
        """Count an answer; True when it is final (sent, or rejected for good). `passed_back`:
        a rejection goes back to the sender (nothing acknowledged, nothing dropped here)."""
        if outcome.ok:
            self._down = False
            self._last_success = time.monotonic()
            self._metrics.add(self._prefix + "forwarded", count - outcome.rejected_spans)
            if outcome.rejected_spans:
                self._metrics.add(self._prefix + "rejected_by_next_hop", outcome.rejected_spans)
                self._guard.once("partial", "tracescore: the next hop accepted a request in part "
                               "and rejected %d spans of it (partial success); they are dropped",
                               outcome.rejected_spans)
            return True
        if not outcome.retry:
            self._down = False
            self._last_success = time.monotonic()  # an answer: forwarding is not stuck
            if passed_back:
                self._metrics.add(self._prefix + "next_hop_rejected_direct", count)
                return True
            self._metrics.add(self._prefix + "rejected_by_next_hop", count)
            self._guard.once(outcome.detail, "tracescore: the next hop rejected %d acknowledged "
                           "spans for good (%s); they are dropped (counted in "
                           "rejected_by_next_hop, logged once per answer)", count, outcome.detail)
            return True
        self._down = True
        self._metrics.add(self._prefix + "forward_retries", 1)
        return False

    def _send(self, body: bytes, count: int) -> bool | None:
        """Send until the next hop answers for good: True answered, None stopping."""
        attempt = 0
        while True:
            outcome = self._attempt(body)
            if self._settled(outcome, count):
                return True
            if attempt == 0:
                _log.warning("tracescore: the next hop is failing (%s); retrying with backoff",
                             outcome.detail)
            delay = outcome.retry_after_s
            if delay is None:
                delay = min(self._max_backoff, 0.05 * 2 ** min(attempt, 10))
                delay *= random.uniform(0.5, 1.0)
            attempt += 1
            with self._cond:
                if self._cond.wait_for(lambda: self._stopping, timeout=min(delay, 30.0)):
                    return None
