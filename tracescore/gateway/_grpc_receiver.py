"""The OTLP/gRPC receiver, and the TLS context both receivers use."""

from __future__ import annotations

import errno
import logging
import ssl
from concurrent import futures
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tracescore.gateway._door import Door, Limits, Refused, Rejected, authorized, listen
from tracescore.gateway._senders import LEAN_GRPC_OPTIONS

_log = logging.getLogger("tracescore.gateway")
_GRPC_SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
_GRPC_LOGS_SERVICE = "opentelemetry.proto.collector.logs.v1.LogsService"
_EMPTY_REPLY = ExportTraceServiceResponse().SerializeToString()


# --- gRPC ---------------------------------------------------------------------------------------
def grpc_receiver(address: tuple[str, int], door: Door, limits: Limits, *,
                  tls: tuple[bytes, bytes, bytes | None] | None, workers: int = 8
                  ) -> tuple[Any, int]:
    """A started gRPC server with the OTLP trace and logs services; (server, bound port)."""
    import grpc

    listen(address).close()  # a taken port fails here with its reason, not in grpc's C log

    def exporting(kind: Any, receive: Any) -> Any:
        def export(raw: bytes, context: grpc.ServicerContext) -> bytes:
            if limits.bearer_token is not None:
                metadata = dict(context.invocation_metadata())
                if not authorized(str(metadata.get("authorization", "")), limits.bearer_token):
                    door.rejected()
                    context.abort(grpc.StatusCode.UNAUTHENTICATED,
                                  "missing or wrong bearer token")
            try:
                request = kind.FromString(raw)
            except DecodeError:
                door.rejected()
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "bad OTLP request")
            try:
                receive(request, raw)
            except Refused as exc:
                context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
            except Rejected as exc:
                context.abort(grpc.StatusCode[exc.grpc_code], str(exc))
            return _EMPTY_REPLY  # (a logs reply without partial success: the same bytes)
        return export

    handlers = (
        grpc.method_handlers_generic_handler(_GRPC_SERVICE, {"Export": (
            grpc.unary_unary_rpc_method_handler(
                exporting(ExportTraceServiceRequest, door.receive)))}),
        grpc.method_handlers_generic_handler(_GRPC_LOGS_SERVICE, {"Export": (
            grpc.unary_unary_rpc_method_handler(
                exporting(ExportLogsServiceRequest, door.receive_logs)))}),
    )
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tracescore-grpc"),
        handlers=handlers,
        options=[("grpc.max_receive_message_length", limits.max_decompressed_bytes),
                 ("grpc.so_reuseport", 0),
                 ("grpc.max_connection_idle_ms", round(limits.idle_timeout_s * 1000)),
                 ("grpc.server_handshake_timeout_ms", round(limits.read_timeout_s * 1000)),
                 ("grpc.max_allowed_incoming_connections", limits.max_connections),
                 *LEAN_GRPC_OPTIONS],
    )
    host, port = address
    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        if tls is not None:
            cert, key, client_ca = tls
            credentials = grpc.ssl_server_credentials(
                [(key, cert)], root_certificates=client_ca,
                require_client_auth=client_ca is not None)
            bound = server.add_secure_port(target, credentials)
        else:
            bound = server.add_insecure_port(target)
    except RuntimeError:  # grpcio says only "Failed to bind"
        bound = 0
    if not bound:
        server.stop(None)
        raise OSError(errno.EADDRNOTAVAIL, f"cannot listen on {target}")
    server.start()
    return server, bound


class TlsFileError(ValueError):
    """A TLS file cannot be used; `which` is "cert_file", "key_file" or "client_ca_file"."""

    def __init__(self, which: str, reason: str) -> None:
        super().__init__(reason)
        self.which = which


def tls_context(cert_file: str, key_file: str, client_ca_file: str | None) -> ssl.SSLContext:
    """A server TLS context, or `TlsFileError` naming the file that is wrong."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(cert_file, key_file)
    except (ssl.SSLError, OSError) as exc:
        raise _which_tls_file(cert_file, exc) from None
    if client_ca_file:
        try:
            context.load_verify_locations(client_ca_file)
        except (ssl.SSLError, OSError) as exc:
            raise TlsFileError("client_ca_file",
                               f"not a PEM CA certificate ({_reason(exc)})") from None
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def _which_tls_file(cert_file: str, exc: Exception) -> TlsFileError:
    if "KEY_VALUES_MISMATCH" in str(exc):
        return TlsFileError("key_file", "the key does not match the certificate in cert_file")
    try:  # the certificate alone: if it reads, the key is what is wrong
        ssl.create_default_context().load_verify_locations(cert_file)
    except (ssl.SSLError, OSError) as cert_exc:
        return TlsFileError("cert_file", f"not a PEM certificate ({_reason(cert_exc)})")
    return TlsFileError("key_file", f"not a PEM private key ({_reason(exc)})")


def _reason(exc: Exception) -> str:
    return getattr(exc, "reason", None) or str(exc)
