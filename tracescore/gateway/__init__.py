"""The scoring gateway (`tracescore serve`): an OTLP service that scores any agent's spans.

    from tracescore.gateway import Gateway, load_gateway_config
    Gateway(load_gateway_config("gateway.yaml")).start()
"""

from __future__ import annotations

from tracescore.gateway._config import (
    ExporterConfig,
    GatewayConfig,
    JournalConfig,
    LimitsConfig,
    ReceiversConfig,
    ScoringConfig,
    TelemetryConfig,
    TlsConfig,
    load_gateway_config,
)
from tracescore.gateway._gateway import Gateway

__all__ = ["ExporterConfig", "Gateway", "GatewayConfig", "JournalConfig", "LimitsConfig",
           "ReceiversConfig", "ScoringConfig", "TelemetryConfig", "TlsConfig",
           "load_gateway_config"]
