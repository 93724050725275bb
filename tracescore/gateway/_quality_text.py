"""The scorers' quality metrics in the gateway's `/metrics`: a pull reader on the gateway's own
MeterProvider, rendered in Prometheus text with the names the Collector's `prometheus` exporter
gives the same OpenTelemetry metrics (dots to underscores, `_total` on counters, `_seconds` on
durations), so rules and dashboards read either."""

from __future__ import annotations

import math
from typing import Any

from tracescore.online.core import QUALITY_NAMES as NAMES

_UNIT_SUFFIX = {"s": "seconds"}


def quality_provider() -> tuple[Any, Any]:
    """A MeterProvider with a cumulative pull reader (collected on each scrape), and the reader."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    return MeterProvider(metric_readers=[reader]), reader


def prometheus_text(reader: Any) -> str:
    """Prometheus text of the quality instruments `reader` sees (others are left out)."""
    try:
        data = reader.get_metrics_data()
    except Exception:  # noqa: BLE001 - a failed collection leaves the quality metrics out
        return ""
    lines: list[str] = []
    for resource_metrics in getattr(data, "resource_metrics", None) or ():
        for scope in resource_metrics.scope_metrics:
            for metric in scope.metrics:
                if metric.name in NAMES:
                    lines.extend(_metric_lines(metric))
    return "\n".join(lines) + ("\n" if lines else "")


def prometheus_name(name: str, unit: str, *, counter: bool) -> str:
    """The Prometheus name of an OpenTelemetry metric (the Collector exporter's translation)."""
    base = name.replace(".", "_")
    suffix = _UNIT_SUFFIX.get(unit)
    if suffix and not base.endswith(f"_{suffix}"):
        base = f"{base}_{suffix}"
    return f"{base}_total" if counter else base


def _metric_lines(metric: Any) -> list[str]:
    from opentelemetry.sdk.metrics.export import Gauge, Histogram, Sum

    data = metric.data
    if isinstance(data, Gauge):
        name = prometheus_name(metric.name, metric.unit, counter=False)
        lines = [f"# HELP {name} {metric.description}", f"# TYPE {name} gauge"]
        lines.extend(f"{name}{_labels(p.attributes)} {_number(p.value)}" for p in data.data_points)
        return lines
    if isinstance(data, Sum):
        name = prometheus_name(metric.name, metric.unit, counter=data.is_monotonic)
        lines = [f"# HELP {name} {metric.description}",
                 f"# TYPE {name} {'counter' if data.is_monotonic else 'gauge'}"]
        lines.extend(f"{name}{_labels(p.attributes)} {_number(p.value)}" for p in data.data_points)
        return lines
    if isinstance(data, Histogram):
        name = prometheus_name(metric.name, metric.unit, counter=False)
        lines = [f"# HELP {name} {metric.description}", f"# TYPE {name} histogram"]
        for point in data.data_points:
            running = 0
            for bound, count in zip((*point.explicit_bounds, math.inf), point.bucket_counts):
                running += count
                le = "+Inf" if bound == math.inf else _number(bound)
                lines.append(f"{name}_bucket{_labels(point.attributes, le=le)} {running}")
            lines.append(f"{name}_sum{_labels(point.attributes)} {_number(point.sum)}")
            lines.append(f"{name}_count{_labels(point.attributes)} {point.count}")
        return lines
    return []


def _labels(attributes: Any, **extra: str) -> str:
    pairs = {**{_label_name(k): str(v) for k, v in (attributes or {}).items()}, **extra}
    if not pairs:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(pairs.items())) + "}"


def _label_name(key: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in key)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))
