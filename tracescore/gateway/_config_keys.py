"""The gateway's settings by key: each YAML key path and its parser, the environment variables
that set them, reading and flattening the YAML file, `host_port`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tracescore import _env
from tracescore._exceptions import ConfigurationError


def _text(path: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigurationError(f"{path} must be a non-empty string, got {value!r}")
    return value


def _optional_text(path: str, value: Any) -> str | None:
    return None if value is None or value is False else _text(path, value)


def _endpoint(path: str, value: Any) -> str | None:
    if value is None or value is False:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        value = f"0.0.0.0:{value}"
    host_port(_text(path, value), path)
    return str(value)


def _same(path: str, value: Any) -> Any:
    return value


def _headers(path: str, value: Any) -> dict[str, str]:
    if isinstance(value, str):
        return _parse_header_list(value, path)
    if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ConfigurationError(f"{path} must map header names to string values, got {value!r}")
    return dict(value)


def _list(path: str, value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise ConfigurationError(f"{path} must be a list, got {value!r}")
    return value


# YAML key path -> parser (the sections' own checks run when they are built)
_KEYS: dict[str, Callable[[str, Any], Any]] = {
    "receivers.grpc": _endpoint,
    "receivers.http": _endpoint,
    "receivers.health": _endpoint,
    "receivers.bearer_token": _optional_text,
    "receivers.tls.cert_file": _optional_text,
    "receivers.tls.key_file": _optional_text,
    "receivers.tls.client_ca_file": _optional_text,
    "receivers.max_request_bytes": _same,
    "receivers.max_decompressed_bytes": _same,
    "receivers.read_timeout_s": _same,
    "receivers.idle_timeout_s": _same,
    "receivers.max_connections": _same,
    "exporter.endpoint": _text,
    "exporter.protocol": _same,
    "exporter.headers": _headers,
    "exporter.compression": _same,
    "exporter.timeout_s": _same,
    "exporter.ca_file": _optional_text,
    "exporter.workers": _same,
    "exporter.max_batch_spans": _same,
    "exporter.max_batch_bytes": _same,
    "exporter.stuck_after_s": _same,
    "journal.path": _text,
    "journal.sync": _same,
    "limits.max_pending_spans": _same,
    "limits.retry_after_s": _same,
    "scoring.judge_model": _optional_text,
    "scoring.scorers": _list,
    "scoring.max_wait_s": _same,
    "scoring.max_held_spans": _same,
    "scoring.queue_size": _same,
    "scoring.concurrency": _same,
    "scoring.shutdown_timeout_s": _same,
    "scoring.isolation": _same,
    "recognise.builtins": _same,
    "recognise.mappings": _list,
    "trace.max_tool_calls": _same,
    "trace.max_chars": _same,
    "trace.max_spans": _same,
    "trace.max_traces": _same,
    "trace.max_bytes": _same,
    "trace.max_age_s": _same,
    "trace.llm_wait_s": _same,
    "conversations.quiet_s": _same,
    "conversations.max_turns": _same,
    "conversations.max_conversations": _same,
    "conversations.max_bytes": _same,
    "conversations.max_age_s": _same,
    "conversations.id_attributes": _list,
    "runs.quiet_s": _same,
    "runs.max_runs": _same,
    "runs.max_bytes": _same,
    "runs.max_age_s": _same,
    "telemetry.metrics": _same,
    "telemetry.logs": _same,
    "telemetry.endpoint": _optional_text,
    "telemetry.protocol": _same,
    "telemetry.interval_s": _same,
    "shutdown_timeout_s": _same,
    "rectifiers": _optional_text,
}

# environment variable -> key path
_ENV: dict[str, str] = {
    _env.GATEWAY_TOKEN.name: "receivers.bearer_token",
    _env.JUDGE_MODEL.name: "scoring.judge_model",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "exporter.endpoint",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "exporter.protocol",
    "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "exporter.headers",
    "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "exporter.compression",
    "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE": "exporter.ca_file",
}
_ENV_FALLBACK = {  # generic variables, used when the traces-specific one is unset
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "OTEL_EXPORTER_OTLP_COMPRESSION",
    "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE": "OTEL_EXPORTER_OTLP_CERTIFICATE",
}


def host_port(value: str, key: str) -> tuple[str, int]:
    """("host", port) of "host:port" ("[::1]:4317" for IPv6); port 0 means any free port."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigurationError(f"{key} must be host:port (port 0-65535), got {value!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


def _read_yaml(path: Path) -> Mapping[str, Any]:
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigurationError(f"config file {str(path)!r}: cannot read: {exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigurationError(f"config file {str(path)!r}: not valid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigurationError(f"config file {str(path)!r}: the top level must be a mapping")
    return data


def _flatten(data: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{prefix}{key}"
        if path in _KEYS:
            flat[path] = value
        elif isinstance(value, Mapping) and any(k.startswith(path + ".") for k in _KEYS):
            flat.update(_flatten(value, path + "."))
        else:
            raise ConfigurationError(f"{path}: unknown setting")
    return flat


def _from_env(var: str, key: str, raw: str) -> Any:
    if key == "exporter.protocol" and raw == "http/json":
        raise ConfigurationError(f"{var}: http/json is not supported by the gateway's exporter; "
                                 f"use grpc or http/protobuf")
    if key == "exporter.headers":
        return _parse_header_list(raw, var)
    return raw


def _parse_header_list(raw: str, key: str) -> dict[str, str]:
    """`k1=v1,k2=v2` (values URL-decoded), as in OTEL_EXPORTER_OTLP_HEADERS."""
    from urllib.parse import unquote

    headers: dict[str, str] = {}
    for part in raw.split(","):
        if not part.strip():
            continue
        name, sep, value = part.partition("=")
        if not sep or not name.strip():
            raise ConfigurationError(f"{key}: bad header {part!r}; write name=value")
        headers[name.strip().lower()] = unquote(value.strip())
    return headers
