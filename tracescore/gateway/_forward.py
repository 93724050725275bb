"""The door behind the gateway: forwards serialized OTLP trace requests to the next hop.

Requests queue in memory (their journal rows stay until the next hop acknowledges them) and
are sent in batches by a few sender threads; retryable failures are retried with backoff for as
long as it takes (the bounded backlog makes the receivers refuse new data meanwhile).
"""

from __future__ import annotations

import gzip
import logging
import random
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from tracescore.gateway._journal import Journal
from tracescore.gateway._metrics import GatewayMetrics

_log = logging.getLogger("tracescore.gateway")

_RETRYABLE_HTTP = frozenset({429, 502, 503, 504})
_GRPC_METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
INLINE_TIMEOUT_S = 1.0  # longest a receiving thread sends itself (senders time out later)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the next hop said: ok, retry (after `retry_after_s` if it said so), or rejected."""

    ok: bool
    retry: bool = False
    retry_after_s: float | None = None
    detail: str = ""
    rejected_spans: int = 0


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
                       retry_after_s=retry_after, detail=f"HTTP {reply.status_code}")

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
        self._retryable = {
            grpc.StatusCode.CANCELLED, grpc.StatusCode.DEADLINE_EXCEEDED,
            grpc.StatusCode.ABORTED, grpc.StatusCode.OUT_OF_RANGE, grpc.StatusCode.UNAVAILABLE,
            grpc.StatusCode.DATA_LOSS, grpc.StatusCode.RESOURCE_EXHAUSTED,
        }

    def send(self, body: bytes, timeout_s: float | None = None) -> Outcome:
        try:
            reply = self._call(body, timeout=timeout_s or self._timeout, metadata=self._metadata,
                               compression=self._compression)
        except self._grpc.RpcError as exc:
            code = exc.code() if callable(getattr(exc, "code", None)) else None
            return Outcome(False, retry=code in self._retryable, detail=f"gRPC {code}")
        return Outcome(True, rejected_spans=_rejected(reply))

    def close(self) -> None:
        self._channel.close()


@dataclass(slots=True)
class _Item:
    ids: tuple[int, ...]
    body: bytes
    count: int


class Forwarder:
    """Batches queued requests and sends them with retries; removes their journal rows once sent."""

    def __init__(self, sender: Sender, journal: Journal | None, metrics: GatewayMetrics, *,
                 max_batch_spans: int = 8192, workers: int = 2, max_backoff_s: float = 5.0
                 ) -> None:
        self._sender = sender
        self._journal = journal
        self._metrics = metrics
        self._max_batch = max_batch_spans
        self._max_backoff = max_backoff_s
        self._items: deque[_Item] = deque()
        self._cond = threading.Condition()
        self._pending = 0  # spans queued or being sent
        self._stopping = False
        self._threads = [threading.Thread(target=self._run, name=f"tracescore-forward-{i}",
                                          daemon=True) for i in range(workers)]
        self._started = False
        self._down = False  # the next hop is failing (for readiness)
        self._inline = False  # a `send_inline` is under way

    @property
    def pending(self) -> int:
        """Spans accepted and not yet acknowledged by the next hop."""
        return self._pending

    @property
    def next_hop_down(self) -> bool:
        return self._down

    def start(self) -> None:
        if not self._started:
            self._started = True
            for thread in self._threads:
                thread.start()

    def put(self, ids: tuple[int, ...], body: bytes, count: int) -> None:
        """Queue one serialized ExportTraceServiceRequest (never blocks)."""
        with self._cond:
            self._items.append(_Item(ids, body, count))
            self._pending += count
            self._cond.notify()

    def send_inline(self, body: bytes, count: int) -> bool:
        """Send on the caller's thread when nothing is queued or being sent this way and the
        next hop is healthy (one attempt, at most `INLINE_TIMEOUT_S`). True once the next hop
        answered for good: the caller may then acknowledge without journaling. False (busy, or
        the attempt failed): the caller journals and `put`s it as usual."""
        with self._cond:
            if self._items or self._inline or self._down or self._stopping:
                return False
            self._inline = True
            self._pending += count
        outcome = self._attempt(body, INLINE_TIMEOUT_S)
        with self._cond:
            self._inline = False
            self._pending -= count
            final = self._settled(outcome, count)
            self._cond.notify_all()
        return final

    def drain(self, timeout_s: float) -> bool:
        """Wait (bounded) until everything queued has been sent."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._pending:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(min(remaining, 0.1))
        return True

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the senders (what is still queued stays in the journal for the next start)."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            if thread.is_alive():
                thread.join(max(0.0, deadline - time.monotonic()))
        self._sender.close()

    def _next_batch(self) -> list[_Item] | None:
        with self._cond:
            while not self._items:
                if self._stopping:
                    return None
                self._cond.wait()
            if self._stopping:
                return None
            batch: list[_Item] = []
            count = 0
            while self._items and (not batch or count + self._items[0].count <= self._max_batch):
                item = self._items.popleft()
                batch.append(item)
                count += item.count
            return batch

    def _run(self) -> None:
        while (batch := self._next_batch()) is not None:
            # concatenated serialized requests are one request with all their resource spans
            body = b"".join(item.body for item in batch)
            count = sum(item.count for item in batch)
            sent = self._send(body, count)
            if sent is None:  # stopping: the rows stay in the journal
                return
            self._done([i for item in batch for i in item.ids], count)

    def _done(self, ids: list[int], count: int) -> None:
        """Spans the next hop answered for good: out of the journal and of the backlog."""
        if self._journal is not None and ids:
            try:
                self._journal.remove(ids)
            except Exception:  # noqa: BLE001 - a failed delete only means a resend later
                _log.warning("tracescore: could not remove forwarded spans from the journal",
                             exc_info=True)
        with self._cond:
            self._pending -= count
            self._cond.notify_all()

    def _attempt(self, body: bytes, timeout_s: float | None = None) -> Outcome:
        try:
            return self._sender.send(body, timeout_s)
        except Exception as exc:  # noqa: BLE001 - a sender bug must not kill the thread
            return Outcome(False, retry=True, detail=type(exc).__name__)

    def _settled(self, outcome: Outcome, count: int) -> bool:
        """Count an answer; True when it is final (sent, or rejected for good)."""
        if outcome.ok:
            self._down = False
            self._metrics.add("forwarded", count - outcome.rejected_spans)
            if outcome.rejected_spans:
                self._metrics.add("rejected_by_next_hop", outcome.rejected_spans)
            return True
        if not outcome.retry:
            self._down = False
            self._metrics.add("rejected_by_next_hop", count)
            _log.warning("tracescore: the next hop rejected %d spans for good (%s); "
                         "they are not retried", count, outcome.detail)
            return True
        self._down = True
        self._metrics.add("forward_retries", 1)
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


def _rejected(body: bytes) -> int:
    """`partial_success.rejected_spans` of an OTLP protobuf reply (0 when absent or unreadable)."""
    if not body:
        return 0
    try:
        return int(ExportTraceServiceResponse.FromString(body).partial_success.rejected_spans)
    except Exception:  # noqa: BLE001 - JSON or other replies: nothing to read
        return 0


def _seconds(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None
