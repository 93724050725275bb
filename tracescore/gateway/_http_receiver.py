"""The OTLP/HTTP receiver (protobuf or JSON, gzip/deflate) and the health / metrics endpoint,
served by aiohttp on a few event-loop threads."""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import math
import socket
import ssl
import sys
import threading
import time
import zlib
from collections.abc import Callable, Coroutine
from concurrent import futures
from typing import Any

from aiohttp import web, web_protocol
from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tracescore._otlp_json import parse_otlp_json

_log = logging.getLogger("tracescore.gateway")
_GRPC_SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
_EMPTY_REPLY = ExportTraceServiceResponse().SerializeToString()
from tracescore.gateway._door import (
    Door,
    Limits,
    Refused,
    Rejected,
    TooLarge,
    authorized,
    decompress,
)


# --- HTTP ---------------------------------------------------------------------------------------
# Why aiohttp's server: it serves every connection from one event-loop thread (no thread per
# connection), does keep-alive and chunked bodies, and it is already installed (litellm needs it).
# Tried on the alternatives: uvicorn 0.54 arms its keep-alive timer only after a first response
# and every received byte cancels it, so a socket that sends nothing, or headers one byte at a
# time, stays open for good; aiohttp arms its timer when the connection opens and partial headers
# do not move it. Neither bounds the time to read a body nor the number of connections, so
# `_Connections` adds both (and counts and logs what it closes), with aiohttp's own timer left
# as a backstop at twice the idle timeout.
class _BurstLog:
    """One warning at the first event of a burst, then at most one line per `every_s`."""

    def __init__(self, what: str, every_s: float = 10.0) -> None:
        self._what = what
        self._every_s = every_s
        self._last = -every_s
        self._count = 0

    def __call__(self) -> None:
        self._count += 1
        now = time.monotonic()
        if now - self._last >= self._every_s:
            _log.warning("tracescore: %s (%d since the last such line)", self._what, self._count)
            self._last, self._count = now, 0


class _Open:
    """Connections open on all loops of one receiver, against `max_connections` (thread-safe)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._count = 0
        self._lock = threading.Lock()

    def take(self) -> bool:
        with self._lock:
            if self._count >= self.limit:
                return False
            self._count += 1
            return True

    def give_back(self) -> None:
        with self._lock:
            self._count -= 1


class _Connections(web.Server):
    """aiohttp's low-level server on one loop, plus the receiver's connection limit (shared by
    its loops) and an idle deadline per connection.

    A connection is idle from when it opens, or finished its last answer, until the headers of
    its next request are complete; one idle for `idle_timeout_s` is closed, and so is one opened
    while `max_connections` are open.
    """

    def __init__(self, handler: Any, door: Door, limits: Limits, open_: _Open,
                 logs: tuple[_BurstLog, _BurstLog], **kwargs: Any) -> None:
        super().__init__(handler, keepalive_timeout=2 * limits.idle_timeout_s,
                         auto_decompress=False, **kwargs)
        self._door = door
        self._limits = limits
        self._open = open_
        self._idle_since: dict[web_protocol.RequestHandler, float] = {}
        self._over_limit, self._idle = logs

    def connection_made(self, handler: web_protocol.RequestHandler,
                        transport: asyncio.Transport) -> None:
        if not self._open.take():
            self._door.connection_closed("refused")
            self._over_limit()
            transport.close()
            return
        super().connection_made(handler, transport)
        self._idle_since[handler] = time.monotonic()

    def connection_lost(self, handler: web_protocol.RequestHandler,
                        exc: BaseException | None = None) -> None:
        if self._idle_since.pop(handler, None) is not None:
            self._open.give_back()
        super().connection_lost(handler, exc)

    def busy(self, handler: Any, busy: bool) -> None:
        if handler in self._idle_since:
            self._idle_since[handler] = math.inf if busy else time.monotonic()

    def sweep(self) -> None:
        """Close the connections idle for longer than the idle timeout."""
        oldest = time.monotonic() - self._limits.idle_timeout_s
        for handler, since in list(self._idle_since.items()):
            if since <= oldest:
                self._idle_since[handler] = math.inf  # closing: counted once
                self._door.connection_closed("idle")
                self._idle()
                handler.force_close()


Answer = tuple[int, bytes, str, dict[str, str]]  # status, body, content type, extra headers
Respond = Callable[[Door, Limits, web.BaseRequest, bytes], Answer]


class _Loop:
    """One event-loop thread of a receiver: it accepts connections from the shared listening
    socket and serves them, answering each request on this thread."""

    def __init__(self, server: HttpServer, index: int, open_: _Open,
                 logs: tuple[_BurstLog, _BurstLog]) -> None:
        self.server = server
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever,
                                       name=f"tracescore-{server.name}-{index}", daemon=True)
        self.connections = _Connections(self._handle, server.door, server.limits, open_, logs,
                                         loop=self.loop, access_log=None)
        self._listener: asyncio.AbstractServer | None = None
        self._sweeper: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.loop.set_exception_handler(self.server.loop_error)
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._open(), self.loop).result(timeout=10)

    def close(self) -> None:
        if self.thread.is_alive():
            try:
                asyncio.run_coroutine_threadsafe(self._shutdown(), self.loop).result(timeout=5)
            except (futures.TimeoutError, RuntimeError):
                _log.debug("tracescore: the %s server did not close in time", self.server.name)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=5)
        if not self.thread.is_alive():
            self.loop.close()

    async def _open(self) -> None:
        server = self.server
        self._listener = await self.loop.create_server(  # its own descriptor, which it closes
            self.connections, sock=server.sock.dup(), ssl=server.tls, backlog=1024,
            ssl_handshake_timeout=server.limits.read_timeout_s if server.tls else None)
        self._sweeper = self.loop.create_task(self._sweep())

    async def _sweep(self) -> None:
        every = max(0.05, min(1.0, self.server.limits.idle_timeout_s / 4))
        while True:
            await asyncio.sleep(every)
            self.connections.sweep()

    async def _shutdown(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
        if self._listener is not None:
            self._listener.close()
        await self.connections.shutdown(timeout=2.0)

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        server, connections = self.server, self.connections
        limits = server.limits
        connections.busy(request.protocol, True)
        try:
            body = await _within(limits.read_timeout_s,
                                 _read_body(request, limits.max_request_bytes)
                                 ) if server.reads_body else b""
            # answered here: one thread wakes per request; the other loops serve meanwhile
            status, payload, content_type, headers = server.respond(
                server.door, limits, request, body)
        except TooLarge as exc:  # the rest of the body is not kept; the connection is closed
            server.door.rejected()
            return _answer(413, str(exc).encode(), close=True)
        except asyncio.TimeoutError:
            server.door.connection_closed("timed_out")
            return _answer(408, f"request body not received within "
                                f"{limits.read_timeout_s:g}s".encode(), close=True)
        finally:
            connections.busy(request.protocol, False)
        return _answer(status, payload, content_type, headers)


class HttpServer:
    """An HTTP/1.1 server (optionally TLS) on `limits.workers` event-loop threads that share one
    listening socket. A loop reads and writes, bounded in size and time, and runs
    `respond(door, limits, request, body)` (decoding, the door's calls, which journal) itself:
    a request costs one thread wake-up, and the thread count does not grow with connections."""

    def __init__(self, sock: socket.socket, door: Door, limits: Limits, respond: Respond, *,
                 name: str, reads_body: bool, tls: ssl.SSLContext | None = None,
                 loops: int | None = None) -> None:
        self.door = door
        self.limits = limits
        self.sock = sock
        self.tls = tls
        self.reads_body = reads_body
        self.name = name
        self.respond = respond
        self._no_files = _BurstLog(f"{name} cannot accept connections: no file descriptor "
                                   f"left (the open files limit)")
        logs = (_BurstLog(f"connection refused: {limits.max_connections} connections open "
                          f"(receivers.max_connections)"),
                _BurstLog(f"connection closed after {limits.idle_timeout_s:g}s idle "
                          f"(receivers.idle_timeout_s)"))
        open_ = _Open(limits.max_connections)
        count = max(1, limits.workers if loops is None else loops)
        self._loops = [_Loop(self, i, open_, logs) for i in range(count)]

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    def start(self) -> None:
        for loop in self._loops:
            loop.start()

    def close(self) -> None:
        for loop in self._loops:
            loop.close()
        self.sock.close()

    def loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        error = context.get("exception")
        if isinstance(error, OSError) and error.errno in (errno.EMFILE, errno.ENFILE):
            self.door.connection_closed("refused")  # accept() failed; asyncio retries in 1 s
            self._no_files()
        else:
            _log.debug("tracescore: %s: %s", self.name, context.get("message"), exc_info=error)


async def _within(seconds: float, read: Coroutine[Any, Any, bytes]) -> bytes:
    """`await read`, or `asyncio.TimeoutError` after `seconds` (no extra task on 3.11+)."""
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(seconds):
            return await read
    return await asyncio.wait_for(read, seconds)


async def _read_body(request: web.BaseRequest, limit: int) -> bytes:
    """The whole body (Content-Length or chunked), refused with `TooLarge` past `limit` bytes."""
    declared = request.content_length
    if declared is not None and declared > limit:
        raise TooLarge(f"request over {limit} bytes")
    if request.headers.get("Expect", "").lower() == "100-continue":  # as curl sends for > 1 KiB
        await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        request.writer.output_size = 0  # the answer's own headers are still to come
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = await request.content.readany()
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit:
            raise TooLarge(f"request over {limit} bytes")
        chunks.append(chunk)


def _answer(status: int, body: bytes, content_type: str = "text/plain",
            headers: dict[str, str] | None = None, *, close: bool = False) -> web.Response:
    response = web.Response(status=status, body=body,
                            headers={"Content-Type": content_type, **(headers or {})})
    if close:
        response.force_close()
    return response


def _otlp_answer(door: Door, limits: Limits, request: web.BaseRequest, body: bytes) -> Answer:
    """POST /v1/traces or /v1/logs."""
    path = request.path.rstrip("/")
    if path not in ("/v1/traces", "/v1/logs"):
        return _rejected(door, 404, b"only /v1/traces and /v1/logs are served")
    if request.method != "POST":
        return _rejected(door, 405, f"POST OTLP to {path}".encode(), {"Allow": "POST"})
    if not authorized(request.headers.get("Authorization"), limits.bearer_token):
        return _rejected(door, 401, b"missing or wrong bearer token",
                         {"WWW-Authenticate": "Bearer"})
    is_json = "json" in request.headers.get("Content-Type", "").lower()
    encoding = request.headers.get("Content-Encoding", "").strip().lower() or None
    kind: type[Message] = (ExportLogsServiceRequest if path == "/v1/logs"
                           else ExportTraceServiceRequest)
    try:
        body = decompress(body, encoding, limits.max_decompressed_bytes)
        if is_json:
            message = parse_otlp_json(body, kind())
        else:
            message = kind.FromString(body)
    except TooLarge as exc:
        return _rejected(door, 413, str(exc).encode())
    except (ValueError, zlib.error, DecodeError) as exc:
        reason = str(exc) if is_json else type(exc).__name__
        return _rejected(door, 400, f"bad OTLP request: {reason}".encode())
    receive = door.receive_logs if path == "/v1/logs" else door.receive
    try:
        receive(message, None if is_json else body)
    except Refused as exc:
        return (429 if exc.busy else 503, str(exc).encode(), "text/plain",
                {"Retry-After": str(max(1, round(limits.retry_after_s)))})
    except Rejected as exc:
        return exc.http_status, str(exc).encode(), "text/plain", {}
    if is_json:
        return 200, b"{}", "application/json", {}
    return 200, _EMPTY_REPLY, "application/x-protobuf", {}


def _health_answer(door: Door, limits: Limits, request: web.BaseRequest, body: bytes) -> Answer:
    """GET / or /health (liveness), /ready (readiness), /metrics (Prometheus text)."""
    path = request.path.rstrip("/") or "/"
    if request.method not in ("GET", "HEAD"):
        return _rejected(door, 405, b"only GET is served", {"Allow": "GET"})
    if path in ("/", "/health", "/livez"):
        return 200, b'{"status":"alive"}', "application/json", {}
    if path in ("/ready", "/readyz"):
        ready, detail = door.health()
        answer = json.dumps({"status": "ready" if ready else "not ready", **detail}).encode()
        return 200 if ready else 503, answer, "application/json", {}
    if path == "/metrics":
        return 200, door.prometheus().encode(), "text/plain; version=0.0.4", {}
    return _rejected(door, 404, b"not found")


def _rejected(door: Door, status: int, body: bytes, headers: dict[str, str] | None = None
              ) -> Answer:
    door.rejected()
    return status, body, "text/plain", headers or {}


def http_receiver(sock: socket.socket, door: Door, limits: Limits,
                  tls: ssl.SSLContext | None) -> HttpServer:
    return HttpServer(sock, door, limits, _otlp_answer, name="otlp-http", reads_body=True,
                      tls=tls)


def health_server(sock: socket.socket, door: Door, limits: Limits) -> HttpServer:
    return HttpServer(sock, door, limits, _health_answer, name="health", reads_body=False,
                      loops=1)
