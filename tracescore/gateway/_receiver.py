"""The door in front: OTLP/gRPC and OTLP/HTTP (protobuf or JSON, gzip/deflate) trace receivers
and the health / metrics endpoint.

A request is acknowledged only after the gateway has journaled it; when the gateway cannot
take it (backlog full, draining, journal failing) the answer is OTLP's retryable one (gRPC
UNAVAILABLE, HTTP 429/503 with Retry-After), so the sender keeps and retries the data.
"""

from __future__ import annotations

import hmac
import json
import logging
import ssl
import threading
import zlib
from concurrent import futures
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import urlsplit

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tracescore._http import send_bytes
from tracescore._otlp_json import parse_otlp_json

_log = logging.getLogger("tracescore.gateway")
_GRPC_SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
_EMPTY_REPLY = ExportTraceServiceResponse().SerializeToString()


class Refused(Exception):
    """The gateway cannot take this request now; the sender should retry later."""

    def __init__(self, reason: str, *, busy: bool) -> None:
        super().__init__(reason)
        self.busy = busy  # True: over capacity (HTTP 429); False: unavailable (HTTP 503)


class TooLarge(Exception):
    """The request (or its decompressed body) is over the configured limit."""


class Door(Protocol):
    """What the receivers call on the gateway."""

    def receive(self, request: ExportTraceServiceRequest, raw: bytes | None) -> None: ...

    def rejected(self) -> None: ...

    def health(self) -> tuple[bool, dict[str, Any]]: ...

    def prometheus(self) -> str: ...


@dataclass(frozen=True)
class Limits:
    max_request_bytes: int
    max_decompressed_bytes: int
    retry_after_s: float
    bearer_token: str | None = None


def decompress(body: bytes, encoding: str | None, limit: int) -> bytes:
    """Body after Content-Encoding (gzip/deflate), at most `limit` bytes (gzip-bomb safe)."""
    if not encoding or encoding == "identity":
        return body
    if encoding not in ("gzip", "deflate"):
        raise ValueError(f"unsupported Content-Encoding {encoding!r}")
    inflater = zlib.decompressobj(zlib.MAX_WBITS | 32 if encoding == "gzip" else zlib.MAX_WBITS)
    try:
        out = inflater.decompress(body, limit + 1)
    except zlib.error:
        if encoding == "deflate":  # raw deflate without zlib header, as some clients send
            inflater = zlib.decompressobj(-zlib.MAX_WBITS)
            out = inflater.decompress(body, limit + 1)
        else:
            raise
    if len(out) > limit or inflater.unconsumed_tail:
        raise TooLarge(f"decompressed body over {limit} bytes")
    return out


def authorized(header: str | None, token: str | None) -> bool:
    if token is None:
        return True
    if not header or not header.lower().startswith("bearer "):
        return False
    return hmac.compare_digest(header[7:].strip().encode(), token.encode())


# --- HTTP ---------------------------------------------------------------------------------------
class HttpServer(ThreadingHTTPServer):
    """A threaded HTTP/1.1 server for one handler class, optionally over TLS."""

    daemon_threads = True
    block_on_close = False
    request_queue_size = 256
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler],
                 door: Door, limits: Limits, tls: ssl.SSLContext | None = None) -> None:
        self.door = door
        self.limits = limits
        super().__init__(address, handler)
        if tls is not None:
            self.socket = tls.wrap_socket(self.socket, server_side=True,
                                          do_handshake_on_connect=False)
        self._thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.1},
                                        name=f"tracescore-{handler.__name__}", daemon=True)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self.shutdown()
        self.server_close()
        self._thread.join(timeout=5)

    def handle_error(self, request: Any, client_address: Any) -> None:
        _log.debug("tracescore: HTTP connection error from %s", client_address, exc_info=True)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: HttpServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def reply(self, status: int, body: bytes, content_type: str = "text/plain",
              headers: dict[str, str] | None = None) -> None:
        if 400 <= status < 429:
            self.server.door.rejected()
        send_bytes(self, status, body, content_type, headers)


class _OTLPHandler(_Handler):
    """POST /v1/traces."""

    def do_POST(self) -> None:
        server = self.server
        limits = server.limits
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            self.close_connection = True
            self.reply(411, b"Content-Length required")
            return
        size = int(length)
        if size > limits.max_request_bytes:
            self.close_connection = True  # the body is not read
            self.reply(413, f"request over {limits.max_request_bytes} bytes".encode())
            return
        body = self.rfile.read(size)
        if urlsplit(self.path).path.rstrip("/") != "/v1/traces":
            self.reply(404, b"only /v1/traces is served")
            return
        if not authorized(self.headers.get("Authorization"), limits.bearer_token):
            self.reply(401, b"missing or wrong bearer token", headers={"WWW-Authenticate": "Bearer"})
            return
        is_json = "json" in (self.headers.get("Content-Type") or "").lower()
        encoding = (self.headers.get("Content-Encoding") or "").strip().lower() or None
        try:
            body = decompress(body, encoding, limits.max_decompressed_bytes)
            if is_json:
                request = parse_otlp_json(body, ExportTraceServiceRequest())
            else:
                request = ExportTraceServiceRequest.FromString(body)
        except TooLarge as exc:
            self.reply(413, str(exc).encode())
            return
        except (ValueError, zlib.error, DecodeError, UnicodeDecodeError) as exc:
            self.reply(400, f"bad OTLP request: {type(exc).__name__}".encode())
            return
        try:
            server.door.receive(request, None if is_json else body)
        except Refused as exc:
            self.reply(429 if exc.busy else 503, str(exc).encode(),
                       headers={"Retry-After": str(max(1, round(limits.retry_after_s)))})
            return
        if is_json:
            self.reply(200, b"{}", "application/json")
        else:
            self.reply(200, _EMPTY_REPLY, "application/x-protobuf")


class _HealthHandler(_Handler):
    """GET / or /health (liveness), /ready (readiness), /metrics (Prometheus text)."""

    def do_GET(self) -> None:
        path = urlsplit(self.path).path.rstrip("/") or "/"
        door = self.server.door
        if path in ("/", "/health", "/livez"):
            self.reply(200, b'{"status":"alive"}', "application/json")
        elif path in ("/ready", "/readyz"):
            ready, detail = door.health()
            body = json.dumps({"status": "ready" if ready else "not ready", **detail}).encode()
            self.reply(200 if ready else 503, body, "application/json")
        elif path == "/metrics":
            self.reply(200, door.prometheus().encode(), "text/plain; version=0.0.4")
        else:
            self.reply(404, b"not found")


def http_receiver(address: tuple[str, int], door: Door, limits: Limits,
                  tls: ssl.SSLContext | None) -> HttpServer:
    return HttpServer(address, _OTLPHandler, door, limits, tls)


def health_server(address: tuple[str, int], door: Door, limits: Limits) -> HttpServer:
    return HttpServer(address, _HealthHandler, door, limits)


# --- gRPC ---------------------------------------------------------------------------------------
def grpc_receiver(address: tuple[str, int], door: Door, limits: Limits, *,
                  tls: tuple[bytes, bytes, bytes | None] | None, workers: int = 8
                  ) -> tuple[Any, int]:
    """A started gRPC server with the OTLP trace service; (server, bound port)."""
    import grpc

    def export(raw: bytes, context: grpc.ServicerContext) -> bytes:
        if limits.bearer_token is not None:
            metadata = dict(context.invocation_metadata())
            if not authorized(str(metadata.get("authorization", "")), limits.bearer_token):
                door.rejected()
                context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")
        try:
            request = ExportTraceServiceRequest.FromString(raw)
        except DecodeError:
            door.rejected()
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "bad OTLP request")
        try:
            door.receive(request, raw)
        except Refused as exc:
            context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
        return _EMPTY_REPLY

    handler = grpc.method_handlers_generic_handler(_GRPC_SERVICE, {
        "Export": grpc.unary_unary_rpc_method_handler(export),
    })
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tracescore-grpc"),
        handlers=(handler,),
        options=[("grpc.max_receive_message_length", limits.max_decompressed_bytes),
                 ("grpc.so_reuseport", 0)],
    )
    host, port = address
    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    if tls is not None:
        cert, key, client_ca = tls
        credentials = grpc.ssl_server_credentials(
            [(key, cert)], root_certificates=client_ca, require_client_auth=client_ca is not None)
        bound = server.add_secure_port(target, credentials)
    else:
        bound = server.add_insecure_port(target)
    if not bound:
        raise OSError(f"cannot listen on {target} (gRPC)")
    server.start()
    return server, bound


def tls_context(cert_file: str, key_file: str, client_ca_file: str | None) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_file, key_file)
    if client_ca_file:
        context.load_verify_locations(client_ca_file)
        context.verify_mode = ssl.CERT_REQUIRED
    return context

