"""The door in front: OTLP/gRPC and OTLP/HTTP (protobuf or JSON, gzip/deflate) trace receivers
and the health / metrics endpoint.

A request is acknowledged only after the gateway has journaled it; when the gateway cannot
take it (backlog full, draining, journal failing) the answer is OTLP's retryable one (gRPC
UNAVAILABLE, HTTP 429/503 with Retry-After), so the sender keeps and retries the data.

The shared parts are in `_door`, the HTTP receiver in `_http_receiver`, the gRPC one (and TLS)
in `_grpc_receiver`; this module names them all.
"""

from __future__ import annotations

from tracescore.gateway._door import (
    Door,
    Limits,
    Refused,
    Rejected,
    TooLarge,
    authorized,
    decompress,
    listen,
)
from tracescore.gateway._grpc_receiver import TlsFileError, grpc_receiver, tls_context
from tracescore.gateway._http_receiver import HttpServer, health_server, http_receiver

__all__ = ["Door", "HttpServer", "Limits", "Refused", "Rejected", "TlsFileError", "TooLarge",
           "authorized", "decompress", "grpc_receiver", "health_server", "http_receiver",
           "listen", "tls_context"]
