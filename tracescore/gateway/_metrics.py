"""The gateway's own counters: exposed in Prometheus text on the health port and as OpenTelemetry
observable instruments (`tracescore.gateway.*`) through a MeterProvider."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

# counter key -> description (Prometheus name: tracescore_gateway_<key>_total)
COUNTERS: dict[str, str] = {
    "requests": "Export requests received",
    "received": "Spans received",
    "refused": "Spans refused with a retryable answer (backpressure, draining)",
    "rejected": "Requests rejected as bad (size, encoding, auth)",
    "forwarded": "Spans acknowledged by the next hop",
    "forward_retries": "Retried sends to the next hop",
    "rejected_by_next_hop": "Acknowledged spans the next hop refused for good (or in a partial "
                            "success): dropped, logged once per answer",
    "next_hop_rejected_direct": "Spans the next hop refused for good on the direct send: passed "
                                "back to the sender, never acknowledged",
    "undeliverable": "Spans refused to the sender (HTTP 413 / gRPC INVALID_ARGUMENT): a span "
                     "cannot fit exporter.max_batch_bytes even capped",
    "dropped_undeliverable": "Acknowledged spans (e.g. journaled by an older version) that cannot "
                             "fit exporter.max_batch_bytes even capped: dropped",
    "capped_for_next_hop": "Spans larger than exporter.max_batch_bytes, cut to fit and marked "
                           "tracescore.span.truncated",
    "held": "Agent spans held for scoring",
    "llm_wait": "Agent spans without content of their own that arrived before their LLM calls "
                "and waited for them (trace.llm_wait_s)",
    "llm_wait_expired": "Of those, spans whose LLM calls did not arrive within trace.llm_wait_s: "
                        "forwarded unscored, reason no_llm_calls",
    "replayed": "Spans forwarded again from the journal after a restart",
    "judge_cost_usd": "Judge cost of the scores attached, in USD",
    "connections_refused": "HTTP connections closed on arrival: receivers.max_connections open, "
                           "or no file descriptor left",
    "connections_idle": "HTTP connections closed after receivers.idle_timeout_s without a request",
    "connections_timed_out": "HTTP requests whose body did not arrive within "
                             "receivers.read_timeout_s (answered 408)",
    "logs_requests": "OTLP logs export requests received",
    "logs_received": "Log records received (forwarded unchanged)",
    "logs_refused": "Log records refused with a retryable answer (backpressure, draining)",
    "logs_forwarded": "Log records acknowledged by the next hop",
    "logs_forward_retries": "Retried sends of log records to the next hop",
    "logs_rejected_by_next_hop": "Acknowledged log records the next hop refused for good (or "
                                 "in a partial success): dropped, logged once per answer",
    "logs_replayed": "Log records forwarded again from the journal after a restart",
    "log_content_records": "Received GenAI content log records kept to be joined to their "
                           "span (trace and span id)",
    "log_records_emitted": "Result log records of the log sink handed to its batch",
    "log_records_exported": "Of those, records the logs endpoint took",
    "log_records_dropped": "Of those, records a failed export dropped (not retried)",
}

# labelled counter key -> (label names, description)
# (Prometheus: tracescore_gateway_<key>_total{label="value",...})
LABELLED: dict[str, tuple[tuple[str, ...], str]] = {
    "unreadable_agent_spans": (("framework", "reason"), (
        "Spans that look like agent calls but cannot be read (not scored), by framework and "
        "reason")),
}


class GatewayMetrics:
    """Thread-safe counters plus gauges read on demand."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, float] = dict.fromkeys(COUNTERS, 0)
        self._gauges: dict[str, Callable[[], float]] = {}
        self._labelled: dict[str, dict[tuple[str, ...], float]] = {key: {} for key in LABELLED}

    def add(self, key: str, amount: float = 1) -> None:
        with self._lock:
            self._counts[key] = self._counts.get(key, 0) + amount

    def add_labelled(self, key: str, labels: tuple[str, ...], amount: float = 1) -> None:
        """Add to the `LABELLED` counter `key` for these label values (in its label order)."""
        with self._lock:
            counts = self._labelled[key]
            counts[labels] = counts.get(labels, 0) + amount

    def labelled(self, key: str) -> dict[tuple[str, ...], float]:
        """The counts of the `LABELLED` counter `key`, by label values."""
        with self._lock:
            return dict(self._labelled[key])

    def gauge(self, key: str, read: Callable[[], float]) -> None:
        self._gauges[key] = read

    def snapshot(self) -> dict[str, float]:
        with self._lock:
            values = dict(self._counts)
        for key, read in self._gauges.items():
            try:
                values[key] = float(read())
            except Exception:  # noqa: BLE001, S112 - a gauge that cannot be read is left out
                continue
        return values

    def prometheus(self, extra: Mapping[str, float] = {}) -> str:
        """Prometheus text exposition of every counter and gauge (plus the `extra` gauges not
        already among them)."""
        lines: list[str] = []
        values = self.snapshot()
        for key, value in values.items():
            counter = key in COUNTERS
            name = f"tracescore_gateway_{key}" + ("_total" if counter else "")
            lines.append(f"# TYPE {name} {'counter' if counter else 'gauge'}")
            lines.append(f"{name} {_number(value)}")
        for key, (names, _) in LABELLED.items():
            name = f"tracescore_gateway_{key}_total"
            lines.append(f"# TYPE {name} counter")
            for labels, value in sorted(self.labelled(key).items()):
                pairs = ",".join(f'{n}="{_label(v)}"' for n, v in zip(names, labels))
                lines.append(f"{name}{{{pairs}}} {_number(value)}")
        for key, value in extra.items():
            if key in values:  # a gauge already served (one TYPE line per family)
                continue
            name = f"tracescore_gateway_{key}"
            lines.append(f"# TYPE {name} gauge")
            lines.append(f"{name} {_number(value)}")
        return "\n".join(lines) + "\n"

    def register(self, meter_provider: Any) -> None:
        """Observable instruments `tracescore.gateway.<key>` on `meter_provider`."""
        from opentelemetry.metrics import CallbackOptions, Observation

        meter = meter_provider.get_meter("tracescore.gateway")

        def reader(key: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
            def observe(options: CallbackOptions) -> Iterable[Observation]:
                return [Observation(self.snapshot().get(key, 0.0))]
            return observe

        for key, description in COUNTERS.items():
            meter.create_observable_counter(f"tracescore.gateway.{key}", [reader(key)],
                                            description=description)
        for key in self._gauges:
            meter.create_observable_gauge(f"tracescore.gateway.{key}", [reader(key)])

        def labelled_reader(key: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
            names = LABELLED[key][0]

            def observe(options: CallbackOptions) -> Iterable[Observation]:
                return [Observation(value, dict(zip(names, labels)))
                        for labels, value in self.labelled(key).items()]
            return observe

        for key, (_, description) in LABELLED.items():
            meter.create_observable_counter(f"tracescore.gateway.{key}", [labelled_reader(key)],
                                            description=description)


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _label(value: str) -> str:
    """A Prometheus label value, escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
