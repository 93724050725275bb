"""The door behind the gateway: forwards serialized OTLP trace requests to the next hop.

Requests queue in memory (their journal rows stay until the next hop acknowledges them) and
are sent in batches of at most `max_batch_spans` spans and `max_batch_bytes` encoded bytes (a
larger request is split, see `_split`) by a few sender threads. Answers are read the way the
Collector's OTLP exporters read them: retryable ones (HTTP 429/502/503/504, gRPC UNAVAILABLE,
DEADLINE_EXCEEDED, ...; RESOURCE_EXHAUSTED only with RetryInfo) are retried with backoff for as
long as it takes (the bounded backlog makes the receivers refuse new data meanwhile); every
other answer is final: counted and logged once per reason, and, on the direct send, passed
back to the sender (`NextHopRejected`) instead of being acknowledged.
"""

from __future__ import annotations

import gzip
import logging
import queue
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tracescore.gateway._journal import Journal
from tracescore.gateway._metrics import GatewayMetrics
from tracescore.gateway._split import Undeliverable, split_request

_log = logging.getLogger("tracescore.gateway")

_RETRYABLE_HTTP = frozenset({429, 502, 503, 504})
_GRPC_METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
INLINE_TIMEOUT_S = 1.0  # longest a receiving thread waits for a direct send (then journals it)
DEFAULT_MAX_BATCH_BYTES = 3584 << 10  # 3.5 MiB: under the Collector's 4 MiB gRPC default
_RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"
# a final next-hop answer, as the sender should hear it: gRPC code -> HTTP status ...
_HTTP_OF_GRPC = {"INVALID_ARGUMENT": 400, "FAILED_PRECONDITION": 400, "UNAUTHENTICATED": 401,
                 "PERMISSION_DENIED": 403, "NOT_FOUND": 404, "ALREADY_EXISTS": 409,
                 "RESOURCE_EXHAUSTED": 413, "UNIMPLEMENTED": 501}
# ... and HTTP status -> gRPC code (never RESOURCE_EXHAUSTED: SDK senders retry it)
_GRPC_OF_HTTP = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
                 404: "NOT_FOUND", 409: "ALREADY_EXISTS", 413: "INVALID_ARGUMENT",
                 501: "UNIMPLEMENTED"}


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the next hop said: ok, retry (after `retry_after_s` if it said so), or rejected."""

    ok: bool
    retry: bool = False
    retry_after_s: float | None = None
    detail: str = ""
    rejected_spans: int = 0
    http_status: int | None = None  # the next hop's HTTP answer
    grpc_code: str | None = None  # or its gRPC status code name

    def for_sender(self) -> tuple[int, str]:
        """(HTTP status, gRPC code name) that pass a final rejection back to a sender."""
        if self.http_status is not None:
            status = self.http_status if 400 <= self.http_status < 600 else 500
            code = _GRPC_OF_HTTP.get(status, "INVALID_ARGUMENT" if status < 500 else "INTERNAL")
            return status, code
        code = self.grpc_code or "INTERNAL"
        return _HTTP_OF_GRPC.get(code, 500), code if code != "RESOURCE_EXHAUSTED" else "INVALID_ARGUMENT"


class NextHopRejected(Exception):
    """The next hop refused a direct send for good: answer the sender the same way, never OK."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(f"the next hop rejected the request: {outcome.detail}")
        self.http_status, self.grpc_code = outcome.for_sender()


class Sender(Protocol):
    def send(self, body: bytes, timeout_s: float | None = None) -> Outcome: ...

    def close(self) -> None: ...


class HttpSender:
    """OTLP/HTTP protobuf to `url` (…/v1/traces)."""

    def __init__(self, url: str, *, headers: Mapping[str, str], compression: str,
                 timeout_s: float, ca_file: str | None = None) -> None:
        import requests

        self._url = url
        self._session = requests.Session()
        self._session.headers.update({"Content-Type": "application/x-protobuf", **headers})
        if compression == "gzip":
            self._session.headers["Content-Encoding"] = "gzip"
        if ca_file:
            self._session.verify = ca_file
        self._gzip = compression == "gzip"
        self._timeout = timeout_s
        self._requests = requests

    def send(self, body: bytes, timeout_s: float | None = None) -> Outcome:
        data = gzip.compress(body, compresslevel=1) if self._gzip else body
        try:
            reply = self._session.post(self._url, data=data, timeout=timeout_s or self._timeout)
        except self._requests.RequestException as exc:
            return Outcome(False, retry=True, detail=type(exc).__name__)
        if 200 <= reply.status_code < 300:
            return Outcome(True, rejected_spans=_rejected(reply.content))
        retry_after = _seconds(reply.headers.get("Retry-After"))
        return Outcome(False, retry=reply.status_code in _RETRYABLE_HTTP,
                       retry_after_s=retry_after, detail=f"HTTP {reply.status_code}",
                       http_status=reply.status_code)

    def close(self) -> None:
        self._session.close()


class GrpcSender:
    """OTLP/gRPC to `target` (host:port); the body is sent as is, never decoded again."""

    def __init__(self, target: str, *, secure: bool, headers: Mapping[str, str], compression: str,
                 timeout_s: float, ca_file: str | None = None) -> None:
        import grpc

        self._grpc = grpc
        options = [("grpc.max_send_message_length", 64 << 20)]
        if secure:
            root = Path(ca_file).read_bytes() if ca_file else None
            self._channel = grpc.secure_channel(target, grpc.ssl_channel_credentials(root),
                                                options=options)
        else:
            self._channel = grpc.insecure_channel(target, options=options)
        self._call = self._channel.unary_unary(_GRPC_METHOD)
        self._metadata = tuple((k.lower(), v) for k, v in headers.items())
        self._compression = grpc.Compression.Gzip if compression == "gzip" else None
        self._timeout = timeout_s
        self._retryable = {  # RESOURCE_EXHAUSTED too, when the answer carries RetryInfo
            grpc.StatusCode.CANCELLED, grpc.StatusCode.DEADLINE_EXCEEDED,
            grpc.StatusCode.ABORTED, grpc.StatusCode.OUT_OF_RANGE, grpc.StatusCode.UNAVAILABLE,
            grpc.StatusCode.DATA_LOSS,
        }

    def send(self, body: bytes, timeout_s: float | None = None) -> Outcome:
        try:
            reply = self._call(body, timeout=timeout_s or self._timeout, metadata=self._metadata,
                               compression=self._compression)
        except self._grpc.RpcError as exc:
            code = exc.code() if callable(getattr(exc, "code", None)) else None
            name = code.name if code is not None else "UNKNOWN"
            retry, delay = code in self._retryable, None
            if code == self._grpc.StatusCode.RESOURCE_EXHAUSTED:
                delay = _retry_info(exc)
                retry = delay is not None
            return Outcome(False, retry=retry, retry_after_s=delay or None,
                           detail=f"gRPC {name}", grpc_code=name)
        return Outcome(True, rejected_spans=_rejected(reply))

    def close(self) -> None:
        self._channel.close()


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


class _Direct:
    """One direct send under way: who owns its outcome once the receiving thread stops waiting."""

    __slots__ = ("adopted", "body", "count", "done", "ids", "outcome")

    def __init__(self, body: bytes, count: int) -> None:
        self.body = body
        self.count = count
        self.done = threading.Event()
        self.ids: tuple[int, ...] | None = None  # journal rows, once adopted
        self.adopted = False
        self.outcome: Outcome | None = None


class Forwarder:
    """Batches queued requests and sends them with retries; removes their journal rows once sent."""

    def __init__(self, sender: Sender, journal: Journal | None, metrics: GatewayMetrics, *,
                 max_batch_spans: int = 8192, max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
                 workers: int = 2, max_backoff_s: float = 5.0, stuck_after_s: float = 300.0
                 ) -> None:
        self._sender = sender
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
        self._threads = [threading.Thread(target=self._run, name=f"tracescore-forward-{i}",
                                          daemon=True) for i in range(workers)]
        self._directs: queue.SimpleQueue[_Direct | None] = queue.SimpleQueue()
        self._threads.append(threading.Thread(target=self._run_direct, daemon=True,
                                              name="tracescore-forward-direct"))
        self._started = False
        self._down = False  # the next hop is failing (for readiness)
        self._inline = False  # a direct send is under way
        self._last_success = time.monotonic()
        self._pending_since: float | None = None  # when the backlog last went from empty
        self._reasons: set[str] = set()  # final rejections logged so far (once per reason)

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
        if len(body) > self.max_batch_bytes:
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
            self._metrics.add("dropped_undeliverable", count)
            self._log_once("undeliverable", "tracescore: %d acknowledged spans cannot fit "
                           "exporter.max_batch_bytes and are dropped (%s)", count, exc)
            self._remove(list(ids))
            return
        if parts.capped:
            self._metrics.add("capped_for_next_hop", parts.capped)
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
            self._metrics.add("forwarded", count - outcome.rejected_spans)
            if outcome.rejected_spans:
                self._metrics.add("rejected_by_next_hop", outcome.rejected_spans)
                self._log_once("partial", "tracescore: the next hop accepted a request in part "
                               "and rejected %d spans of it (partial success); they are dropped",
                               outcome.rejected_spans)
            return True
        if not outcome.retry:
            self._down = False
            self._last_success = time.monotonic()  # an answer: forwarding is not stuck
            if passed_back:
                self._metrics.add("next_hop_rejected_direct", count)
                return True
            self._metrics.add("rejected_by_next_hop", count)
            self._log_once(outcome.detail, "tracescore: the next hop rejected %d acknowledged "
                           "spans for good (%s); they are dropped (counted in "
                           "rejected_by_next_hop, logged once per answer)", count, outcome.detail)
            return True
        self._down = True
        self._metrics.add("forward_retries", 1)
        return False

    def _log_once(self, reason: str, message: str, *args: object) -> None:
        if reason not in self._reasons:
            self._reasons.add(reason)
            _log.warning(message, *args)

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


def _rejected(body: bytes) -> int:
    """`partial_success.rejected_spans` of an OTLP protobuf reply (0 when absent or unreadable)."""
    if not body:
        return 0
    try:
        return int(ExportTraceServiceResponse.FromString(body).partial_success.rejected_spans)
    except Exception:  # noqa: BLE001 - JSON or other replies: nothing to read
        return 0


def _retry_info(error: Any) -> float | None:
    """The RetryInfo delay (seconds, 0 when none is given) of a gRPC error, None without RetryInfo."""
    from google.rpc import error_details_pb2, status_pb2

    trailers = error.trailing_metadata() if callable(getattr(error, "trailing_metadata", None)) else None
    for key, value in trailers or ():
        if key != "grpc-status-details-bin":
            continue
        try:
            status = status_pb2.Status.FromString(value)
        except Exception:  # noqa: BLE001 - unreadable details: as if there were none
            return None
        for detail in status.details:
            if detail.type_url == _RETRY_INFO:
                info = error_details_pb2.RetryInfo.FromString(detail.value)
                return info.retry_delay.seconds + info.retry_delay.nanos / 1e9
    return None


def _seconds(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None
