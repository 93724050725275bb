"""OTLP exporter endpoints, validated once wherever one is given (configure(), the OTEL_* variables,
`tracescore serve --endpoint`, `exporter.endpoint`, `telemetry.endpoint`, `tracescore rescore`).

The rules are the OTel SDK's: OTLP/HTTP takes an http or https URL; OTLP/gRPC takes an http or
https URL (http: plaintext) or a bare `host:port`. Any other scheme, a missing host, a bad port or
white space is a `ConfigurationError` naming the setting, never a guess.
"""

from __future__ import annotations

import os
import re
from typing import Any
from urllib.parse import urlsplit

from tracescore._exceptions import ConfigurationError

HTTP_EXAMPLE = "http://localhost:4318"
GRPC_EXAMPLE = "http://localhost:4317"
TRACES_PATH = "/v1/traces"
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1", "[::1]")
ENV_INSECURE = "OTEL_EXPORTER_OTLP_INSECURE"
_SCHEMES = ("http", "https")
_HOST = re.compile(r"[A-Za-z0-9._~%-]+|[0-9A-Fa-f:.]+")  # a DNS name / IPv4, or IPv6 (no brackets)
_NAME = r"(?:[A-Za-z0-9._~%-]+|\[[0-9A-Fa-f:.]+\])"  # host, IPv6 in brackets
_BARE = re.compile(_NAME + r"(?::[^:/?#@\[\]\\\s]*)?")  # host[:port] as written, port unchecked
_NETLOC = re.compile(r"(?:[^@/\\\s]*@)?" + _NAME + r"(?::[0-9]+)?")


def http_traces_url(endpoint: str, key: str = "endpoint") -> str:
    """Validate an OTLP/HTTP endpoint; a base URL gets /v1/traces appended (OTEL_EXPORTER_OTLP_ENDPOINT
    semantics), a URL that already ends in /v1/traces is kept."""
    parts = _url(endpoint, key, "OTLP/HTTP", f"an http(s) URL such as {HTTP_EXAMPLE}")
    if parts.path.rstrip("/").endswith(TRACES_PATH):
        return endpoint
    return endpoint.rstrip("/") + TRACES_PATH


def grpc_target(endpoint: str, key: str = "endpoint") -> tuple[str, bool]:
    """Validate an OTLP/gRPC endpoint; returns (URL, insecure). A bare "host:port" is plaintext for
    loopback hosts and TLS otherwise (unless OTEL_EXPORTER_OTLP_INSECURE=true)."""
    if "://" not in endpoint and _BARE.fullmatch(endpoint):
        host = endpoint.rsplit(":", 1)[0] if endpoint.count(":") == 1 or "]" in endpoint \
            else endpoint
        insecure = (host in LOOPBACK_HOSTS
                    or os.environ.get(ENV_INSECURE, "").strip().lower() == "true")
        endpoint = f"{'http' if insecure else 'https'}://{endpoint}"
    parts = _url(endpoint, key, "OTLP/gRPC",
                 f"host:port or an http(s) URL such as {GRPC_EXAMPLE}")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ConfigurationError(f"{key}: {endpoint!r} is not an OTLP/gRPC endpoint: gRPC takes "
                                 f"no path, write host:port or {GRPC_EXAMPLE}")
    return endpoint, parts.scheme == "http"


def grpc_address(url: str, default_port: int = 4317) -> str:
    """"host:port" of a URL `grpc_target` returned (https without a port: 443)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else default_port)
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def check_endpoint(endpoint: str, protocol: str, key: str) -> str:
    """The endpoint unchanged when `protocol` ("grpc" or "http/protobuf") takes it."""
    if protocol == "grpc":
        grpc_target(endpoint, key)
    else:
        http_traces_url(endpoint, key)
    return endpoint


def _url(endpoint: str, key: str, kind: str, expected: str) -> Any:
    if not isinstance(endpoint, str) or not endpoint:
        raise ConfigurationError(f"{key} must be {expected}, got {endpoint!r}")
    if any(ch.isspace() for ch in endpoint):
        raise ConfigurationError(f"{key}: {endpoint!r} contains white space; write {expected}")
    parts = urlsplit(endpoint)
    if parts.scheme not in _SCHEMES or "://" not in endpoint:
        scheme = f"scheme {parts.scheme!r}" if "://" in endpoint else "no http:// or https://"
        raise ConfigurationError(f"{key}: {endpoint!r} is not an {kind} endpoint ({scheme}); "
                                 f"use {expected}")
    if not parts.hostname or not _HOST.fullmatch(parts.hostname):
        raise ConfigurationError(f"{key}: {endpoint!r} has no valid host name; use e.g. {expected}")
    try:
        port = parts.port  # urlsplit checks the port lazily
    except ValueError:
        port = -1
    if port is None and parts.netloc.endswith(":") or port is not None and not 0 < port < 65536:
        raise ConfigurationError(f"{key}: invalid port in {endpoint!r} (1-65535); "
                                 f"use e.g. {expected}")
    if not _NETLOC.fullmatch(parts.netloc):
        raise ConfigurationError(f"{key}: {endpoint!r} has no valid host name; use e.g. {expected}")
    return parts
