"""The gateway's own telemetry over OTLP: its metrics (and the scorers') and the log sink's
records, to `telemetry.endpoint` (default: the next hop)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from tracescore.gateway._config import GatewayConfig


def _endpoint(config: GatewayConfig) -> tuple[str, str, bool]:
    endpoint = config.telemetry_endpoint or config.exporter_endpoint
    protocol = config.telemetry_protocol or config.exporter_protocol
    return endpoint, protocol, urlsplit(endpoint).scheme != "https"


def meter_provider(config: GatewayConfig) -> Any:
    """A MeterProvider exporting every `telemetry.interval_s` over OTLP."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    endpoint, protocol, insecure = _endpoint(config)
    exporter: Any
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter

        exporter = OTLPMetricExporter(endpoint=endpoint, insecure=insecure,
                                      headers=dict(config.exporter_headers) or None)
    else:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
            OTLPMetricExporter as HttpMetricExporter,
        )

        exporter = HttpMetricExporter(endpoint=_url(endpoint, "/v1/metrics"),
                                      headers=dict(config.exporter_headers) or None)
    reader = PeriodicExportingMetricReader(
        exporter, export_interval_millis=int(config.telemetry_interval_s * 1000))
    return MeterProvider(metric_readers=[reader], resource=_resource())


def logger_provider(config: GatewayConfig) -> Any:
    """A LoggerProvider for the "log" sink, batching records over OTLP."""
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor

    endpoint, protocol, insecure = _endpoint(config)
    exporter: Any
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter

        exporter = OTLPLogExporter(endpoint=endpoint, insecure=insecure,
                                   headers=dict(config.exporter_headers) or None)
    else:
        from opentelemetry.exporter.otlp.proto.http._log_exporter import (
            OTLPLogExporter as HttpLogExporter,
        )

        exporter = HttpLogExporter(endpoint=_url(endpoint, "/v1/logs"),
                                   headers=dict(config.exporter_headers) or None)
    provider = LoggerProvider(resource=_resource())
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

    from tracescore import __version__

    return Resource.create({"service.name": "tracescore-gateway",
                            "service.version": __version__})
