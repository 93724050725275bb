"""The senders to the next hop (OTLP/HTTP and OTLP/gRPC) and how an answer reads (`Outcome`):
retryable or final, the delay asked for, the spans rejected in part."""

from __future__ import annotations

import gzip
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceResponse,
)

_log = logging.getLogger("tracescore.gateway")
# grpcio's per-call channelz tracing, which the gateway never reads: off in the gRPC receiver
# and sender (with grpcio's own client retries, about 4 % of the CPU per pass-through request)
LEAN_GRPC_OPTIONS = (("grpc.enable_channelz", 0),)

_RETRYABLE_HTTP = frozenset({429, 502, 503, 504})
_GRPC_METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
GRPC_LOGS_METHOD = "/opentelemetry.proto.collector.logs.v1.LogsService/Export"
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
    """OTLP/HTTP protobuf to `url` (…/v1/traces, or …/v1/logs)."""

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
                 timeout_s: float, ca_file: str | None = None, method: str = _GRPC_METHOD
                 ) -> None:
        import grpc

        self._grpc = grpc
        # the forwarder retries itself (and counts it); grpcio's own retries would buffer
        # every request for a replay it never makes
        options = [("grpc.max_send_message_length", 64 << 20), ("grpc.enable_retries", 0),
                   *LEAN_GRPC_OPTIONS]
        if secure:
            root = Path(ca_file).read_bytes() if ca_file else None
            self._channel = grpc.secure_channel(target, grpc.ssl_channel_credentials(root),
                                                options=options)
        else:
            self._channel = grpc.insecure_channel(target, options=options)
        self._call = self._channel.unary_unary(method)
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


def _rejected(body: bytes) -> int:
    """`partial_success.rejected_spans` of an OTLP protobuf reply (0 when absent or unreadable;
    a logs reply's `rejected_log_records` has the same field number, and reads the same)."""
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
