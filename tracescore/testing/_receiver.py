"""A real OTLP receiver on loopback (HTTP protobuf/JSON and gRPC) that decodes what exporters send."""

from __future__ import annotations

import gzip
import json
import threading
import time
import zlib
from collections.abc import Callable, Iterable
from concurrent import futures
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

import grpc
from google.protobuf.message import DecodeError, Message
from grpc import Server as _GrpcServer
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from tracescore.testing._decode import (
    ReceivedLog,
    ReceivedMetric,
    ReceivedSpan,
    logs_from_request,
    metrics_from_request,
    parse_otlp_json,
    spans_from_request,
)
from tracescore.testing._http import LoopbackServer, QuietHandler
from tracescore.testing._service import Service

T = TypeVar("T")


@dataclass(frozen=True)
class _Signal:
    name: str  # "traces" | "logs" | "metrics"
    request_type: type[Message]
    response_type: type[Message]
    decode: Callable[[Any, str], list[Any]]


_TRACES = _Signal(
    "traces",
    trace_service_pb2.ExportTraceServiceRequest,
    trace_service_pb2.ExportTraceServiceResponse,
    spans_from_request,
)
_LOGS = _Signal(
    "logs",
    logs_service_pb2.ExportLogsServiceRequest,
    logs_service_pb2.ExportLogsServiceResponse,
    logs_from_request,
)
_METRICS = _Signal(
    "metrics",
    metrics_service_pb2.ExportMetricsServiceRequest,
    metrics_service_pb2.ExportMetricsServiceResponse,
    metrics_from_request,
)
_HTTP_PATHS = {"/v1/traces": _TRACES, "/v1/logs": _LOGS, "/v1/metrics": _METRICS}

_GRPC_CODES = {
    400: grpc.StatusCode.INVALID_ARGUMENT,
    401: grpc.StatusCode.UNAUTHENTICATED,
    403: grpc.StatusCode.PERMISSION_DENIED,
    429: grpc.StatusCode.RESOURCE_EXHAUSTED,
    500: grpc.StatusCode.INTERNAL,
}


@dataclass(frozen=True, kw_only=True)
class ReceivedRequest:
    """One export request as it arrived (headers lower-cased; gRPC metadata for gRPC)."""

    signal: str
    protocol: str
    headers: dict[str, str]
    content_encoding: str | None
    rejected_with: int | None  # status the receiver answered with when told to fail, else None


class OTLPReceiver(Service):
    """OTLP/HTTP and OTLP/gRPC receiver on free loopback ports, for end-to-end export tests.

    Use as a context manager (or `start()`/`stop()`); point an exporter at `http_endpoint` (HTTP; the
    exporter appends `/v1/traces`, or use `traces_url`) or `grpc_endpoint`; then `wait_for_spans(...)`.
    """

    def __init__(self, *, http: bool = True, grpc: bool = True) -> None:
        self._want_http, self._want_grpc = http, grpc
        self._cond = threading.Condition()
        self._spans: list[ReceivedSpan] = []
        self._logs: list[ReceivedLog] = []
        self._metrics: list[ReceivedMetric] = []
        self._requests: list[ReceivedRequest] = []
        self._fail_remaining = 0
        self._fail_status = 503
        self._http: LoopbackServer | None = None
        self._grpc: _GrpcServer | None = None
        self._grpc_port: int | None = None
        self._grpc_pool: futures.ThreadPoolExecutor | None = None

    # --- lifecycle ----------------------------------------------------------------------------
    def start(self) -> OTLPReceiver:
        if self._http is not None or self._grpc is not None:
            return self
        if self._want_http:
            self._http = LoopbackServer(_OTLPHTTPHandler, self)
            self._http.start()
        if self._want_grpc:
            self._grpc_pool = futures.ThreadPoolExecutor(
                max_workers=4, thread_name_prefix="otlp-grpc"
            )
            server = grpc.server(self._grpc_pool)
            trace_service_pb2_grpc.add_TraceServiceServicer_to_server(
                _servicer(self, _TRACES), server
            )
            logs_service_pb2_grpc.add_LogsServiceServicer_to_server(_servicer(self, _LOGS), server)
            metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(
                _servicer(self, _METRICS), server
            )
            self._grpc_port = server.add_insecure_port("127.0.0.1:0")
            server.start()
            self._grpc = server
        return self

    def stop(self) -> None:
        http, self._http = self._http, None
        server, self._grpc = self._grpc, None
        if http is not None:
            http.close()
        if server is not None:
            server.stop(grace=None).wait(timeout=5)
        pool, self._grpc_pool = self._grpc_pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    # --- addresses ----------------------------------------------------------------------------
    @property
    def http_endpoint(self) -> str:
        """Base URL, e.g. "http://127.0.0.1:4318" (what OTEL_EXPORTER_OTLP_ENDPOINT takes)."""
        if self._http is None:
            raise RuntimeError("OTLPReceiver HTTP server is not running")
        return f"http://127.0.0.1:{self._http.port}"

    @property
    def traces_url(self) -> str:
        """Full traces URL, e.g. "http://127.0.0.1:4318/v1/traces" (what OTLPSpanExporter(endpoint=) takes)."""
        return f"{self.http_endpoint}/v1/traces"

    @property
    def logs_url(self) -> str:
        return f"{self.http_endpoint}/v1/logs"

    @property
    def metrics_url(self) -> str:
        return f"{self.http_endpoint}/v1/metrics"

    @property
    def grpc_endpoint(self) -> str:
        """ "http://127.0.0.1:PORT": the http scheme makes the OTel gRPC exporters use an insecure channel."""
        return f"http://{self.grpc_address}"

    @property
    def grpc_address(self) -> str:
        """ "127.0.0.1:PORT" without scheme."""
        if self._grpc_port is None:
            raise RuntimeError("OTLPReceiver gRPC server is not running")
        return f"127.0.0.1:{self._grpc_port}"

    # --- received data ------------------------------------------------------------------------
    @property
    def spans(self) -> list[ReceivedSpan]:
        with self._cond:
            return list(self._spans)

    @property
    def logs(self) -> list[ReceivedLog]:
        with self._cond:
            return list(self._logs)

    @property
    def metrics(self) -> list[ReceivedMetric]:
        with self._cond:
            return list(self._metrics)

    @property
    def requests(self) -> list[ReceivedRequest]:
        with self._cond:
            return list(self._requests)

    def spans_named(self, name: str) -> list[ReceivedSpan]:
        return [span for span in self.spans if span.name == name]

    def children_of(self, parent: ReceivedSpan) -> list[ReceivedSpan]:
        return [
            s
            for s in self.spans
            if s.parent_span_id == parent.span_id and s.trace_id == parent.trace_id
        ]

    def clear(self) -> None:
        with self._cond:
            self._spans.clear()
            self._logs.clear()
            self._metrics.clear()
            self._requests.clear()
            self._fail_remaining = 0

    def fail_next(self, n: int = 1, status: int = 503) -> None:
        """Answer the next `n` export requests (any signal/protocol) with `status` (gRPC: mapped code)."""
        with self._cond:
            self._fail_remaining, self._fail_status = n, status

    # --- waiting ------------------------------------------------------------------------------
    def wait_for_spans(
        self,
        predicate_or_count: int | Callable[[ReceivedSpan], bool] = 1,
        timeout: float = 10.0,
        *,
        count: int = 1,
    ) -> list[ReceivedSpan]:
        """Block until spans arrive; return them.

        An int `n` waits for at least n spans and returns all spans. A predicate waits until at least
        `count` spans satisfy it and returns the matching ones. Raises TimeoutError after `timeout`.
        """
        return self._wait(
            self._spans, predicate_or_count, count, timeout, "spans", lambda s: s.name
        )

    def wait_for_span_ids(
        self, ids: Iterable[tuple[str, str]], timeout: float = 10.0
    ) -> list[ReceivedSpan]:
        """Block until every `(trace_id, span_id)` in `ids` (hex) has arrived at least once;
        return the spans received with those ids (a span delivered twice is in it twice).

        For at-least-once paths (retries, a journal replay): a duplicate never stands in for a
        span still on its way, as it does in a count. TimeoutError says how many are missing.
        """
        wanted = set(ids)
        deadline = time.monotonic() + timeout
        with self._cond:
            while missing := wanted - {(s.trace_id, s.span_id) for s in self._spans}:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(
                        f"waited {timeout}s for {len(wanted)} spans by id, {len(missing)} "
                        f"missing, e.g. {sorted(missing)[:3]!r}"
                    )
                self._cond.wait(remaining)
            return [s for s in self._spans if (s.trace_id, s.span_id) in wanted]

    def wait_for_logs(
        self,
        predicate_or_count: int | Callable[[ReceivedLog], bool] = 1,
        timeout: float = 10.0,
        *,
        count: int = 1,
    ) -> list[ReceivedLog]:
        """Like `wait_for_spans`, for log records."""
        return self._wait(
            self._logs, predicate_or_count, count, timeout, "logs", lambda r: r.event_name or r.body
        )

    def wait_for_metric(self, name: str, timeout: float = 10.0) -> ReceivedMetric:
        """Block until a metric with this name arrives; return the latest one received."""
        return self._wait(
            self._metrics, lambda m: m.name == name, 1, timeout, "metrics", lambda m: m.name
        )[-1]

    def _wait(
        self,
        store: list[T],
        predicate_or_count: int | Callable[[T], bool],
        count: int,
        timeout: float,
        what: str,
        describe: Callable[[T], object],
    ) -> list[T]:
        if isinstance(predicate_or_count, int):
            wanted, predicate = predicate_or_count, None
        else:
            wanted, predicate = count, predicate_or_count

        def matches() -> list[T]:
            return list(store) if predicate is None else [item for item in store if predicate(item)]

        deadline = time.monotonic() + timeout
        with self._cond:
            while len(found := matches()) < wanted:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    seen = [describe(item) for item in store]
                    raise TimeoutError(
                        f"waited {timeout}s for {wanted} matching {what}, got {len(found)}; received: {seen!r}"
                    )
                self._cond.wait(remaining)
            return found

    # --- ingestion (called from server threads) ----------------------------------------------
    def _ingest(
        self,
        signal: _Signal,
        request: Message,
        protocol: str,
        headers: dict[str, str],
        encoding: str | None,
    ) -> int | None:
        """Store one decoded request; return the failure status to answer with, if told to fail."""
        records = None
        with self._cond:
            rejected = None
            if self._fail_remaining > 0:
                self._fail_remaining -= 1
                rejected = self._fail_status
            self._requests.append(
                ReceivedRequest(
                    signal=signal.name,
                    protocol=protocol,
                    headers=headers,
                    content_encoding=encoding,
                    rejected_with=rejected,
                )
            )
            if rejected is None:
                records = signal.decode(request, protocol)
                stores: dict[str, list[Any]] = {
                    "traces": self._spans, "logs": self._logs, "metrics": self._metrics
                }
                stores[signal.name].extend(records)
            self._cond.notify_all()
            return rejected


def _servicer(receiver: OTLPReceiver, signal: _Signal) -> Any:
    """A gRPC servicer object with an `Export` method feeding `receiver`."""

    class _Servicer:
        def Export(self, request: Message, context: grpc.ServicerContext) -> Message:
            metadata = {key.lower(): str(value) for key, value in context.invocation_metadata()}
            status = receiver._ingest(
                signal, request, "grpc", metadata, metadata.get("grpc-encoding")
            )
            if status is not None:
                context.abort(
                    _GRPC_CODES.get(status, grpc.StatusCode.UNAVAILABLE), f"told to fail ({status})"
                )
            return signal.response_type()

    return _Servicer()


class _OTLPHTTPHandler(QuietHandler):
    """POST /v1/{traces,logs,metrics} with protobuf or JSON bodies, gzip/deflate accepted."""

    def do_POST(self) -> None:
        receiver: OTLPReceiver = self.server.owner
        signal = _HTTP_PATHS.get(urlsplit(self.path).path.rstrip("/"))
        body = self.read_body()
        if signal is None:
            self.send_bytes(404, b"not found", "text/plain")
            return
        encoding = (self.headers.get("Content-Encoding") or "").lower() or None
        is_json = "json" in (self.headers.get("Content-Type") or "").lower()
        try:
            if encoding == "gzip":
                body = gzip.decompress(body)
            elif encoding == "deflate":
                body = zlib.decompress(body)
            request = signal.request_type()
            if is_json:
                parse_otlp_json(body, request)
            else:
                request.ParseFromString(body)
        except (OSError, zlib.error, DecodeError, ValueError) as exc:
            self.send_bytes(400, f"bad OTLP request: {exc}".encode(), "text/plain")
            return
        headers = {key.lower(): value for key, value in self.headers.items()}
        status = receiver._ingest(signal, request, "http", headers, encoding)
        if status is not None:
            self.send_bytes(status, f"told to fail ({status})".encode(), "text/plain")
        elif is_json:
            self.send_bytes(200, json.dumps({}).encode(), "application/json")
        else:
            self.send_bytes(
                200, signal.response_type().SerializeToString(), "application/x-protobuf"
            )
