"""Span exporters that configure() builds: OTLP over HTTP/gRPC, console, and an OTLP-JSON-lines file.

Arguments are validated here, at configuration time; the exporters themselves never raise on export.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import threading
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SpanExporter, SpanExportResult

from tracescore._endpoints import grpc_target, http_traces_url
from tracescore._exceptions import ConfigurationError
from tracescore._private_files import open_private

_log = logging.getLogger(__name__)

EXPORTER_NAMES = ("otlp", "otlp-http", "otlp-grpc", "console", "file", "none")
_OTLP_NAMES = ("otlp", "otlp-http", "otlp-grpc")
_COMPRESSIONS = ("gzip", "deflate", "none")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9a-z-]+")  # an HTTP token (RFC 9110), lower-cased

# Standard environment variables (read here only to pick the protocol; the OTel exporters read the rest).
ENV_TRACES_EXPORTER = "OTEL_TRACES_EXPORTER"
ENV_PROTOCOL = "OTEL_EXPORTER_OTLP_PROTOCOL"
ENV_TRACES_PROTOCOL = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
ENV_ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
_PROBE_TIMEOUT_S = 0.5  # a connect that takes longer is a slow backend, not one that is down



class OTLPJsonFileExporter(SpanExporter):
    """Appends each exported batch as one OTLP JSON line (an ExportTraceServiceRequest) to a file.

    Thread-safe; the file is flushed after every batch so a crash loses at most the pending batch.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            self._file: Any = open_private(self.path, "a")
        except OSError as exc:
            raise ConfigurationError(f"cannot open trace file {str(self.path)!r}: {exc}") from exc

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            line = encode_otlp_json(spans)
        except Exception:  # noqa: BLE001 - an exporter reports failure, never raises
            _log.exception("tracescore: could not encode %d spans as OTLP JSON", len(spans))
            return SpanExportResult.FAILURE
        with self._lock:
            if self._file is None:
                return SpanExportResult.FAILURE
            try:
                self._file.write(line + "\n")
                self._file.flush()
            except OSError:
                _log.exception("tracescore: could not write spans to %s", self.path)
                return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True  # every batch is flushed as it is written

    def shutdown(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


def encode_otlp_json(spans: Sequence[ReadableSpan]) -> str:
    """One ExportTraceServiceRequest in OTLP JSON form (camelCase keys, hex ids, integer enums)."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from tracescore._otlp_json import to_otlp_json

    return to_otlp_json(encode_spans(spans))


def otlp_protocol_from_env() -> str:
    """"otlp-http" or "otlp-grpc" from OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL (default http/protobuf)."""
    value = (os.environ.get(ENV_TRACES_PROTOCOL) or os.environ.get(ENV_PROTOCOL) or "").strip().lower()
    if value in ("", "http/protobuf"):
        return "otlp-http"
    if value == "grpc":
        return "otlp-grpc"
    _log.warning("tracescore: unsupported OTLP protocol %r in the environment; using http/protobuf",
                 value)
    return "otlp-http"


def default_exporter_names() -> list[str]:
    """Exporter names from OTEL_TRACES_EXPORTER (comma list), or ["otlp"]."""
    raw = os.environ.get(ENV_TRACES_EXPORTER, "").strip().lower()
    if not raw:
        return ["otlp"]
    names = [n.strip() for n in raw.split(",") if n.strip()]
    known = [n for n in names if n in EXPORTER_NAMES]
    if len(known) != len(names):
        _log.warning("tracescore: ignoring unsupported %s values in %r", ENV_TRACES_EXPORTER, raw)
    return known or ["otlp"]


def is_otlp(name: str) -> bool:
    return name in _OTLP_NAMES


def check_compression(compression: str | None) -> str | None:
    if compression is None:
        return None
    value = str(compression).strip().lower()
    if value not in _COMPRESSIONS:
        raise ConfigurationError(
            f"compression must be one of {', '.join(_COMPRESSIONS)} (got {compression!r})")
    return value


def check_headers(headers: Mapping[str, str] | str | None) -> dict[str, str] | None:
    """Headers as a dict with lower-case names; a string is parsed like OTEL_EXPORTER_OTLP_HEADERS."""
    if headers is None:
        return None
    if isinstance(headers, str):
        return _parse_header_string(headers)
    if not isinstance(headers, Mapping):
        raise ConfigurationError(f"headers must be a mapping or a 'k=v,k2=v2' string (got {headers!r})")
    for key, value in headers.items():
        if not isinstance(key, str) or not isinstance(value, str) or not key:
            raise ConfigurationError(f"headers must map str to str (bad entry {key!r}: {value!r})")
    return {key.lower(): value for key, value in headers.items()}  # gRPC metadata must be lower-case


def _parse_header_string(headers: str) -> dict[str, str]:
    """'k=v,k2=v2' (values URL-encoded, as in OTEL_EXPORTER_OTLP_HEADERS); every entry must be k=v."""
    from urllib.parse import unquote

    parsed: dict[str, str] = {}
    for entry in headers.split(","):
        if not entry.strip():
            continue
        key, sep, value = entry.partition("=")
        key = unquote(key).strip().lower()
        if not sep or not _HEADER_NAME.fullmatch(key):
            raise ConfigurationError(
                f"headers must be 'name=value' pairs separated by commas (bad entry {entry.strip()!r})")
        parsed[key] = unquote(value).strip()
    return parsed


def _check_env_endpoint(check: Callable[[str, str], object]) -> None:
    """Validate the endpoint the OTLP exporter will read from the environment (naming the variable)."""
    var = next((name for name in ENV_ENDPOINTS if os.environ.get(name)), None)
    if var is not None:
        check(os.environ[var], var)


def build_exporter(name: str, *, endpoint: str | None, headers: dict[str, str] | None,
                   compression: str | None, file_path: str | os.PathLike[str] | None) -> SpanExporter | None:
    """The exporter for one validated name; None for "none"."""
    if name == "otlp":
        name = otlp_protocol_from_env()
    if name == "otlp-http":
        from opentelemetry.exporter.otlp.proto.http import Compression as HttpCompression
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
            OTLPSpanExporter as HttpExporter,
        )

        if not endpoint:
            _check_env_endpoint(http_traces_url)
        return HttpExporter(
            endpoint=http_traces_url(endpoint) if endpoint else None,
            headers=headers,
            compression=HttpCompression(compression) if compression else None,
        )
    if name == "otlp-grpc":
        from grpc import Compression as GrpcCompression
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as GrpcExporter,
        )

        if not endpoint:
            _check_env_endpoint(grpc_target)
        target, insecure = grpc_target(endpoint) if endpoint else (None, None)
        grpc_compression = {"gzip": GrpcCompression.Gzip, "deflate": GrpcCompression.Deflate,
                            "none": GrpcCompression.NoCompression}.get(compression or "")
        return GrpcExporter(endpoint=target, insecure=insecure, headers=headers,
                            compression=grpc_compression)
    if name == "console":
        return ConsoleSpanExporter()
    if name == "file":
        if file_path is None:
            raise ConfigurationError('exporter "file" needs file_path="spans.jsonl"')
        return OTLPJsonFileExporter(file_path)
    if name == "none":
        return None
    raise ConfigurationError(f"unknown exporter {name!r}; use one of {', '.join(EXPORTER_NAMES)} "
                             "or a SpanExporter instance")


def otlp_destination(exporter: SpanExporter) -> str | None:
    """Where an OpenTelemetry SDK OTLP exporter sends (URL, or host:port for gRPC), None for any
    other exporter. Both keep the endpoint they resolved (argument or environment) in `_endpoint`."""
    endpoint = getattr(exporter, "_endpoint", None)
    if not isinstance(endpoint, str) or not type(exporter).__module__.startswith(
            "opentelemetry.exporter.otlp."):
        return None
    return endpoint


def refuses_connections(destination: str) -> bool:
    """True when nothing listens at `destination` (connection refused, or the host name does not
    resolve); False when it accepts, is slow to answer, or is reached through a proxy."""
    parts = urlsplit(destination if "://" in destination else f"//{destination}")
    try:
        host, port = parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return False
    if not host or (urllib.request.getproxies() and not urllib.request.proxy_bypass(host)):
        return False
    try:
        with socket.create_connection((host, port), timeout=_PROBE_TIMEOUT_S):
            return False
    except (ConnectionRefusedError, socket.gaierror):
        return True
    except OSError:  # a timeout, no route: not known to be down
        return False

