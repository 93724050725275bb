"""What the receivers share: the `Door` they call on the gateway, its answers (`Refused`,
`Rejected`, `TooLarge`), the `Limits`, body decompression, the bearer check, `listen`."""

from __future__ import annotations

import hmac
import logging
import socket
import zlib
from dataclasses import dataclass
from typing import Any, Protocol

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

_log = logging.getLogger("tracescore.gateway")
_GRPC_SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
_EMPTY_REPLY = ExportTraceServiceResponse().SerializeToString()



class Refused(Exception):
    """The gateway cannot take this request now; the sender should retry later."""

    def __init__(self, reason: str, *, busy: bool) -> None:
        super().__init__(reason)
        self.busy = busy  # True: over capacity (HTTP 429); False: unavailable (HTTP 503)


class Rejected(Exception):
    """The gateway refuses this request for good (the next hop rejected it, or it can never be
    delivered): answer `http_status` / gRPC `grpc_code`, never OK."""

    def __init__(self, reason: str, http_status: int, grpc_code: str) -> None:
        super().__init__(reason)
        self.http_status = http_status
        self.grpc_code = grpc_code


class TooLarge(Exception):
    """The request (or its decompressed body) is over the configured limit."""


class Door(Protocol):
    """What the receivers call on the gateway."""

    def receive(self, request: ExportTraceServiceRequest, raw: bytes | None) -> None: ...

    def receive_logs(self, request: ExportLogsServiceRequest, raw: bytes | None) -> None: ...

    def rejected(self) -> None: ...

    def health(self) -> tuple[bool, dict[str, Any]]: ...

    def prometheus(self) -> str: ...

    def connection_closed(self, reason: str) -> None:
        """Count a connection closed by the receiver: "refused", "idle" or "timed_out"."""


@dataclass(frozen=True)
class Limits:
    max_request_bytes: int
    max_decompressed_bytes: int
    retry_after_s: float
    bearer_token: str | None = None
    read_timeout_s: float = 30.0  # to read a request body, or to finish a TLS handshake
    idle_timeout_s: float = 60.0  # without a complete request (headers) on a connection
    max_connections: int = 1000  # open connections per receiver
    workers: int = 8  # event-loop threads per HTTP receiver (each answers its requests)


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


def listen(address: tuple[str, int]) -> socket.socket:
    """A listening TCP socket on `address` (OSError when it cannot be bound)."""
    host, port = address
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family, backlog=1024)
