"""The gateway's own telemetry over OTLP: its metrics (and the scorers') and the log sink's
records, to `telemetry.endpoint` (default: the next hop)."""

from __future__ import annotations

import importlib
from typing import Any
from urllib.parse import urlsplit

from tracescore._endpoints import grpc_target
from tracescore._version import __version__
from tracescore.gateway._config import GatewayConfig
from tracescore.gateway._log_records import counted
from tracescore.gateway._metrics import GatewayMetrics

# signal -> (gRPC exporter module, HTTP exporter module, class name in both, HTTP path)
_EXPORTERS = {
    "metrics": ("opentelemetry.exporter.otlp.proto.grpc.metric_exporter",
                "opentelemetry.exporter.otlp.proto.http.metric_exporter",
                "OTLPMetricExporter", "/v1/metrics"),
    "logs": ("opentelemetry.exporter.otlp.proto.grpc._log_exporter",
             "opentelemetry.exporter.otlp.proto.http._log_exporter",
             "OTLPLogExporter", "/v1/logs"),
}


def _exporter(config: GatewayConfig, signal: str) -> Any:
    """The OTLP exporter of `signal` to `telemetry.endpoint` (default: the next hop)."""
    grpc_module, http_module, name, path = _EXPORTERS[signal]
    endpoint = config.telemetry_endpoint or config.exporter_endpoint
    protocol = config.telemetry_protocol or config.exporter_protocol
    headers = dict(config.exporter_headers) or None
    if protocol == "grpc":
        exporter_class = getattr(importlib.import_module(grpc_module), name)
        url, insecure = grpc_target(endpoint, "telemetry.endpoint")
        return exporter_class(endpoint=url, insecure=insecure, headers=headers)
    exporter_class = getattr(importlib.import_module(http_module), name)
    return exporter_class(endpoint=_url(endpoint, path), headers=headers)


def meter_provider(config: GatewayConfig) -> Any:
    """A MeterProvider exporting every `telemetry.interval_s` over OTLP."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    reader = PeriodicExportingMetricReader(
        _exporter(config, "metrics"), export_interval_millis=int(config.telemetry_interval_s * 1000))
    return MeterProvider(metric_readers=[reader], resource=_resource())


def logger_provider(config: GatewayConfig, metrics: GatewayMetrics | None = None) -> Any:
    """A LoggerProvider for the "log" sink, batching records over OTLP (counted in `metrics`:
    emitted, exported, dropped, and the gauge of those still batched)."""
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor

    provider = LoggerProvider(resource=_resource())
    exporter = _exporter(config, "logs")
    if metrics is not None:
        emitted, exporter = counted(exporter, metrics)
        provider.add_log_record_processor(emitted)  # type: ignore[arg-type]  # duck-typed
    provider.add_log_record_processor(BatchLogRecordProcessor(exporter))
    return provider


def wants_logs(config: GatewayConfig) -> bool:
    """`telemetry.logs`, or (unset) whether a scorer uses the "log" sink."""
    if config.telemetry_logs is not None:
        return config.telemetry_logs
    return any("log" in getattr(s, "sinks", ()) for s in config.scorers or ())


def _url(endpoint: str, path: str) -> str:
    return endpoint if urlsplit(endpoint).path.rstrip("/").endswith(path) else (
        endpoint.rstrip("/") + path)


def _resource() -> Any:
    from opentelemetry.sdk.resources import Resource

    return Resource.create({"service.name": "tracescore-gateway",
                            "service.version": __version__})
