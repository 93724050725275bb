"""A scripted next hop for the gateway: a real OTLP/HTTP or OTLP/gRPC trace server on loopback that
answers each request as a script says (status, delay, RetryInfo) and counts what it took.

    with NextHop("grpc", lambda n, size: Answer("UNAVAILABLE") if n < 3 else OK) as hop:
        ... gateway forwarding to hop.endpoint ...
        hop.wait_for_spans(100)

Spans are recorded (by trace id, span id) when the answer is OK, after the delay, whether or not
the client is still waiting: a server that finishes a request its client gave up on is what makes
a retry a duplicate.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc
from google.protobuf.duration_pb2 import Duration
from google.rpc import error_details_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from typing_extensions import Self

_SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
_GRPC_DEFAULT_MAX = 4 << 20  # the Collector's OTLP gRPC receiver default (max_recv_msg_size_mib 4)


@dataclass(frozen=True)
class Answer:
    """HTTP status (int) or gRPC code name; `delay_s` before answering; `retry_info_s`: a gRPC
    RetryInfo detail with that delay; `rejected_spans`: a partial success."""

    status: int | str = "OK"
    delay_s: float = 0.0
    retry_info_s: float | None = None
    rejected_spans: int = 0

    @property
    def ok(self) -> bool:
        return self.status in ("OK", 200)


OK = Answer()
Script = Callable[[int, int], Answer]  # (request number from 0, body bytes) -> answer


class NextHop:
    """`protocol` "http" or "grpc"; `script` answers every request; `max_bytes` the largest
    request taken (gRPC: the server's message limit, answered RESOURCE_EXHAUSTED; HTTP: 413)."""

    def __init__(self, protocol: str, script: Script | None = None, *,
                 max_bytes: int = _GRPC_DEFAULT_MAX) -> None:
        self.protocol = protocol
        self.script: Script = script or (lambda n, size: OK)
        self.max_bytes = max_bytes
        self.sizes: list[int] = []  # every request's body size, in arrival order
        self.answers: list[Answer] = []
        self.spans: Counter[tuple[bytes, bytes]] = Counter()  # taken (OK) spans
        self._lock = threading.Condition()
        self._server: Any = None
        self.port = 0

    # --- lifecycle --------------------------------------------------------------------------
    def start(self) -> Self:
        if self.protocol == "grpc":
            self._start_grpc()
        else:
            self._start_http()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        if self.protocol == "grpc":
            self._server.stop(None)
        else:
            self._server.shutdown()
            self._server.server_close()
        self._server = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def endpoint(self) -> str:
        """`exporter.endpoint` for the gateway (its `exporter.protocol` is `protocol_setting`)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def protocol_setting(self) -> str:
        return "grpc" if self.protocol == "grpc" else "http/protobuf"

    # --- reading ----------------------------------------------------------------------------
    def wait_for_spans(self, count: int, timeout: float = 60.0) -> Counter[tuple[bytes, bytes]]:
        """The taken spans once `count` distinct ones arrived (or at the timeout)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while len(self.spans) < count and time.monotonic() < deadline:
                self._lock.wait(0.1)
            return Counter(self.spans)

    def wait_for_requests(self, count: int, timeout: float = 30.0) -> int:
        deadline = time.monotonic() + timeout
        with self._lock:
            while len(self.sizes) < count and time.monotonic() < deadline:
                self._lock.wait(0.1)
            return len(self.sizes)

    # --- serving ----------------------------------------------------------------------------
    def _answer(self, body: bytes) -> Answer:
        with self._lock:
            number = len(self.sizes)
            self.sizes.append(len(body))
        answer = self.script(number, len(body))
        if answer.delay_s:
            time.sleep(answer.delay_s)
        if answer.ok:
            request = ExportTraceServiceRequest.FromString(body)
            keys = [(s.trace_id, s.span_id) for rs in request.resource_spans
                    for ss in rs.scope_spans for s in ss.spans]
            with self._lock:
                self.spans.update(keys[answer.rejected_spans:])
                self._lock.notify_all()
        with self._lock:
            self.answers.append(answer)
            self._lock.notify_all()
        return answer

    def _reply(self, answer: Answer) -> bytes:
        reply = ExportTraceServiceResponse()
        if answer.rejected_spans:
            reply.partial_success.rejected_spans = answer.rejected_spans
            reply.partial_success.error_message = "scripted partial success"
        return reply.SerializeToString()

    def _start_grpc(self) -> None:
        def export(raw: bytes, context: grpc.ServicerContext) -> bytes:
            answer = self._answer(raw)
            if answer.ok:
                return self._reply(answer)
            code = grpc.StatusCode[str(answer.status)]
            if answer.retry_info_s is not None:
                status = status_pb2.Status(code=code.value[0], message="scripted")
                delay = Duration()
                delay.FromNanoseconds(int(answer.retry_info_s * 1e9))
                status.details.add().Pack(error_details_pb2.RetryInfo(retry_delay=delay))
                context.set_trailing_metadata(
                    (("grpc-status-details-bin", status.SerializeToString()),))
            context.abort(code, f"scripted {code.name}")
            return b""  # not reached

        handler = grpc.method_handlers_generic_handler(_SERVICE, {
            "Export": grpc.unary_unary_rpc_method_handler(export)})
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=8),
                                   handlers=(handler,),
                                   options=[("grpc.max_receive_message_length", self.max_bytes)])
        self.port = self._server.add_insecure_port("127.0.0.1:0")
        self._server.start()

    def _start_http(self) -> None:
        hop = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                if length > hop.max_bytes:
                    with hop._lock:
                        hop.sizes.append(length)
                    self._send(413, b"request too large")
                    return
                answer = hop._answer(body)
                if answer.ok:
                    self._send(200, hop._reply(answer), "application/x-protobuf")
                else:
                    self._send(int(answer.status), b"scripted")

            def _send(self, status: int, body: bytes, kind: str = "text/plain") -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", kind)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:  # the client gave up waiting
                    pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
