"""`Gateway`: the scoring gateway as one object: receivers -> engine -> forwarder, journal, health.

    gateway = Gateway(load_gateway_config("gateway.yaml")).start()
    ...
    gateway.stop()  # stop accepting, bounded wait for scoring, forward everything, close
"""

from __future__ import annotations

import errno
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans

from tracescore._exceptions import ConfigurationError
from tracescore.gateway import _otlp
from tracescore.gateway._backlog import register_backlog
from tracescore.gateway._config import GatewayConfig, processor_options
from tracescore.gateway._config_keys import host_port
from tracescore.gateway._engine import Engine
from tracescore.gateway._forward import Forwarder
from tracescore.gateway._journal import PASS, Journal
from tracescore.gateway._metrics import GatewayMetrics
from tracescore.gateway._open_files import fit_connections, open_files_limit
from tracescore.gateway._quality_text import prometheus_text, quality_provider
from tracescore.gateway._receiver import (
    HttpServer,
    Limits,
    Refused,
    Rejected,
    TlsFileError,
    grpc_receiver,
    health_server,
    http_receiver,
    listen,
    tls_context,
)
from tracescore.gateway._senders import (
    GRPC_LOGS_METHOD,
    GrpcSender,
    HttpSender,
    NextHopRejected,
    Sender,
)
from tracescore.gateway._split import Undeliverable

_log = logging.getLogger("tracescore.gateway")
# a journal write probe: a valid request without spans (harmless if a crash leaves it behind)
_PROBE = ExportTraceServiceRequest(
    resource_spans=[ResourceSpans(schema_url="probe" * 800)]).SerializeToString()


class Gateway:
    """The scoring gateway (`tracescore serve`): receive OTLP, score agent spans, forward all.

    `start()` opens the journal (replaying what a previous run left), the forwarder and the
    receivers; `stop()` drains. Ports actually bound: `grpc_port`, `http_port`, `health_port`.
    """

    def __init__(self, config: GatewayConfig | None = None, *, meter_provider: Any = None,
                 logger_provider: Any = None) -> None:
        if config is None:
            from tracescore.gateway._config import load_gateway_config

            config = load_gateway_config()
        if config.scorers is None or config.recognisers is None:
            from tracescore.gateway._config import with_overrides
            from tracescore.gateway._config_scorers import _recognisers, build_online_scorers

            config = with_overrides(
                config,
                scorers=build_online_scorers(config.scorers, config.judge_model, base=Path.cwd()),
                recognisers=_recognisers([], True) if config.recognisers is None
                else tuple(config.recognisers),
            )
        self.config = config
        self.metrics = GatewayMetrics()
        self._options = processor_options(config)
        self._meter_provider = meter_provider
        self._logger_provider = logger_provider
        self._owned: list[Any] = []  # providers built here from `telemetry`, shut down at stop
        self._lock = threading.Lock()
        self._accepting = False
        self._stopped = False
        self._journal: Journal | None = None
        self._store_error: str | None = None  # the last journal write failure, until one works
        self._forwarder: Forwarder | None = None
        self._logs: Forwarder | None = None  # log records: forwarded as they came
        self._engine: Engine | None = None
        self._quality: Any = None  # the pull reader of the scorers' quality metrics
        self._servers: list[HttpServer] = []
        self._grpc: Any = None
        self.grpc_port: int | None = None
        self.http_port: int | None = None
        self.health_port: int | None = None

    # --- lifecycle ----------------------------------------------------------------------------
    def start(self) -> Gateway:
        config = self.config
        self._journal = Journal(config.journal_path, sync=config.journal_sync)
        try:
            self._build_telemetry()
            self._forwarder = Forwarder(
                _sender(config), self._journal, self.metrics,
                max_batch_spans=config.max_batch_spans, max_batch_bytes=config.max_batch_bytes,
                workers=config.forward_workers, stuck_after_s=config.stuck_after_s,
            )
            self._engine = Engine(
                scorers=config.scorers or (), recognisers=config.recognisers or (),
                output=self._forwarder, send_inline=self._forwarder.send_inline,
                metrics=self.metrics, journal=self._journal,
                processor_options=self._options, meter_provider=self._meter_provider,
                logger_provider=self._logger_provider, trace_options=config.trace,
                max_request_bytes=config.max_batch_bytes, run_options=config.runs,
                conversations=config.conversations,
            )
            self._logs = Forwarder(
                _sender(config, "logs"), self._journal.logs, self.metrics,
                max_batch_spans=config.max_batch_spans, max_batch_bytes=config.max_batch_bytes,
                workers=1, stuck_after_s=config.stuck_after_s, signal="logs")
            self.metrics.gauge("pending", lambda: self._forwarder.pending if self._forwarder else 0)
            self.metrics.gauge("logs_pending", lambda: self._logs.pending if self._logs else 0)
            log_content = self._engine.log_content
            self.metrics.gauge("log_content_spans", lambda: len(log_content))
            self.metrics.gauge("held_now", lambda: self._engine.held if self._engine else 0)
            register_backlog(self.metrics, self._engine)
            quality, self._quality = quality_provider()  # the scorers' quality in /metrics
            self._owned.append(quality)
            self._engine.core.metrics.quality.add_meter(quality.get_meter("tracescore.online"))
            self._engine.core.metrics.quality.add_rectifiers(config.rectifiers)
            traces = self._engine.traces
            self.metrics.gauge("trace_buffer_traces", lambda: traces.traces)
            self.metrics.gauge("trace_buffer_bytes", lambda: traces.bytes)
            self.metrics.gauge("trace_buffer_evicted", lambda: traces.evicted)
            if self._meter_provider is not None:
                self.metrics.register(self._meter_provider)
            self._forwarder.start()
            self._logs.start()
            self._engine.replay()
            self._replay_logs()
            self._open_receivers()
        except BaseException:
            self._close_quietly()
            raise
        self._accepting = True
        _log.info("tracescore gateway listening: grpc=%s http=%s health=%s -> %s (%s)",
                  *(("off" if port is None else port)  # a receiver turned off, not "None"
                    for port in (self.grpc_port, self.http_port, self.health_port)),
                  config.exporter_endpoint, config.exporter_protocol)
        return self

    def stop(self, timeout_s: float | None = None) -> bool:
        """Stop accepting, wait (bounded) for scoring, forward every span, close. True when
        everything reached the next hop (else the rest stays in the journal). Idempotent."""
        with self._lock:
            if self._stopped:
                return True
            self._stopped = True
            self._accepting = False
        timeout = self.config.shutdown_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout
        self._close_receivers()
        if self._engine is not None:
            self._engine.shutdown(min(self._options["shutdown_timeout_s"], timeout * 0.5))
        drained = True
        if self._forwarder is not None:
            drained = self._forwarder.drain(max(0.0, deadline - time.monotonic()))
            self._forwarder.stop(timeout_s=2.0)
            if not drained:
                _log.warning("tracescore: %d spans not forwarded before the shutdown timeout; "
                             "they stay in the journal for the next start",
                             self._forwarder.pending)
        if self._logs is not None:
            logs_drained = self._logs.drain(max(0.0, deadline - time.monotonic()))
            self._logs.stop(timeout_s=2.0)
            if not logs_drained:
                _log.warning("tracescore: %d log records not forwarded before the shutdown "
                             "timeout; they stay in the journal for the next start",
                             self._logs.pending)
            drained = drained and logs_drained
        if self._journal is not None:
            self._journal.close()
        self._close_telemetry()
        return drained

    def __enter__(self) -> Gateway:  # noqa: PYI034
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # --- the receivers' side (Door) -----------------------------------------------------------
    def receive(self, request: ExportTraceServiceRequest, raw: bytes | None) -> None:
        """Journal and route one request, or raise `Refused` (retryable) without taking any of it."""
        count = _otlp.count_spans(request)
        self.metrics.add("requests")
        self.metrics.add("received", count)
        forwarder, engine = self._forwarder, self._engine
        if not self._accepting or forwarder is None or engine is None:
            self.metrics.add("refused", count)
            raise Refused("the gateway is shutting down", busy=False)
        if count and forwarder.pending + engine.held + count > self.config.max_pending_spans:
            self.metrics.add("refused", count)
            raise Refused("the gateway is at its span limit; retry later", busy=True)
        try:
            engine.accept(request, raw, count=count)
        except NextHopRejected as exc:  # the direct send's final answer, passed back
            raise Rejected(str(exc), exc.http_status, exc.grpc_code) from None
        except Undeliverable as exc:  # nothing was journaled: refused for good, not acked
            self.metrics.add("undeliverable", count)
            raise Rejected(str(exc), 413, "INVALID_ARGUMENT") from None
        except Exception as exc:  # noqa: BLE001 - e.g. the journal's disk is full: nothing was acked
            self.metrics.add("refused", count)
            self._store_error = f"{type(exc).__name__}: {exc}"
            _log.warning("tracescore: could not journal a request; refused", exc_info=True)
            raise Refused("the gateway could not store the request", busy=False) from None
        self._store_error = None

    def receive_logs(self, request: ExportLogsServiceRequest, raw: bytes | None) -> None:
        """Journal one logs request and queue it for the next hop unchanged, after keeping the
        GenAI content records in it for the spans they belong to; or raise `Refused`."""
        count = sum(len(sl.log_records) for rl in request.resource_logs for sl in rl.scope_logs)
        self.metrics.add("logs_requests")
        self.metrics.add("logs_received", count)
        logs, engine, journal = self._logs, self._engine, self._journal
        if not self._accepting or logs is None or engine is None or journal is None:
            self.metrics.add("logs_refused", count)
            raise Refused("the gateway is shutting down", busy=False)
        if count and logs.pending + count > self.config.max_pending_spans:
            self.metrics.add("logs_refused", count)
            raise Refused("the gateway is at its log record limit; retry later", busy=True)
        body = raw if raw is not None else request.SerializeToString()
        try:
            row = journal.logs.add(count, body)
        except Exception as exc:  # noqa: BLE001 - e.g. the disk is full: nothing was acked
            self.metrics.add("logs_refused", count)
            self._store_error = f"{type(exc).__name__}: {exc}"
            _log.warning("tracescore: could not journal a logs request; refused", exc_info=True)
            raise Refused("the gateway could not store the request", busy=False) from None
        logs.put((row,), body, count)
        try:  # content for held agent spans: never in the way of forwarding
            before = engine.log_content.kept
            keys = engine.log_content.add_otlp(request, raw)
            self.metrics.add("log_content_records", engine.log_content.kept - before)
            if keys:
                engine.content_logged(keys)
        except Exception:  # noqa: BLE001 - content is extra: the journaled request still goes on
            _log.warning("tracescore: could not read the content of a logs request",
                         exc_info=True)

    def _replay_logs(self) -> None:
        """Queue the log requests a previous run acknowledged and did not forward."""
        assert self._journal is not None and self._logs is not None
        replayed = 0
        for entry in self._journal.logs.entries():
            self._logs.put((entry.id,), entry.body, entry.count)
            replayed += entry.count
        if replayed:
            self.metrics.add("logs_replayed", replayed)
            _log.info("tracescore: replaying %d journaled log records", replayed)

    def rejected(self) -> None:
        self.metrics.add("rejected")

    def connection_closed(self, reason: str) -> None:
        self.metrics.add(f"connections_{reason}")

    def health(self) -> tuple[bool, dict[str, Any]]:
        forwarder, engine = self._forwarder, self._engine
        pending = forwarder.pending if forwarder else 0
        held = engine.held if engine else 0
        full = pending + held >= self.config.max_pending_spans
        down = bool(forwarder and forwarder.next_hop_down)
        reasons: list[str] = []
        if not self._accepting:
            reasons.append("not accepting (starting or shutting down)")
        if full:
            reasons.append(f"at limits.max_pending_spans ({self.config.max_pending_spans})")
        if self._store_error is not None and not self._journal_writable():
            reasons.append(f"the journal cannot store requests ({self._store_error})")
        stuck = forwarder.stuck_for() if forwarder else None
        if stuck is not None:
            reasons.append(f"forwarding stuck: no request delivered for {stuck:.0f}s while "
                           f"{pending} spans wait (exporter.stuck_after_s)")
        logs = self._logs
        stuck = logs.stuck_for() if logs else None
        if stuck is not None:
            reasons.append(f"forwarding log records stuck: none delivered for {stuck:.0f}s "
                           f"while {logs.pending if logs else 0} wait (exporter.stuck_after_s)")
        return not reasons, {"accepting": self._accepting, "pending_spans": pending,
                             "held_spans": held, "next_hop_down": down, "reasons": reasons,
                             "pending_log_records": logs.pending if logs else 0}

    def _journal_writable(self) -> bool:
        """After a failed write: can the journal store again? (a probe write, which clears the
        failure when it works, so readiness comes back without traffic)."""
        journal = self._journal
        if journal is None:
            return False
        try:
            journal.remove(journal.add([(PASS, 0, _PROBE)]))
        except Exception as exc:  # noqa: BLE001 - still failing
            self._store_error = f"{type(exc).__name__}: {exc}"
            return False
        self._store_error = None
        return True

    def prometheus(self) -> str:
        extra: dict[str, float] = {}
        if self._engine is not None:
            for key, value in self._engine.core.stats().items():
                extra[f"scoring_{key.replace('.', '_')}"] = value
            for key, value in self._engine.run_stats().items():
                extra[key.replace(".", "_")] = value
        return self.metrics.prometheus(extra) + (
            "" if self._quality is None else prometheus_text(self._quality))

    def stats(self) -> dict[str, float]:
        """Counters and gauges (received, forwarded, refused, held, pending, ...; with run-scope
        scorers, runs_waiting and runs_scored.<reason>)."""
        values = self.metrics.snapshot()
        if self._engine is not None:
            values.update(self._engine.run_stats())
        return values

    # --- internals ----------------------------------------------------------------------------
    def _build_telemetry(self) -> None:
        from tracescore.gateway import _telemetry

        if self._meter_provider is None and self.config.telemetry_metrics:
            self._meter_provider = _telemetry.meter_provider(self.config)
            self._owned.append(self._meter_provider)
        if self._logger_provider is None and _telemetry.wants_logs(self.config):
            self._logger_provider = _telemetry.logger_provider(self.config, self.metrics)
            self._owned.append(self._logger_provider)

    def _close_telemetry(self) -> None:
        owned, self._owned = self._owned, []
        for provider in owned:
            try:
                provider.shutdown()
            except Exception:  # noqa: BLE001 - best effort at shutdown: the others still close
                _log.debug("tracescore: shutting down a telemetry provider failed", exc_info=True)

    def _open_receivers(self) -> None:
        """Bind every receiver, or raise `ConfigurationError` naming the setting at fault."""
        config = self.config
        limits = Limits(config.max_request_bytes, config.max_decompressed_bytes,
                        config.retry_after_s, config.bearer_token,
                        read_timeout_s=config.read_timeout_s,
                        idle_timeout_s=config.idle_timeout_s,
                        max_connections=fit_connections(
                            config.max_connections,
                            (config.grpc_endpoint is not None) + (config.http_endpoint is not None),
                            open_files_limit()))
        tls = None
        if config.tls_cert_file and config.tls_key_file:
            try:
                tls = tls_context(config.tls_cert_file, config.tls_key_file,
                                  config.tls_client_ca_file)
            except TlsFileError as exc:
                path = getattr(config, f"tls_{exc.which}")
                raise ConfigurationError(f"receivers.tls.{exc.which}: {path}: {exc}") from None
        if config.grpc_endpoint is not None:
            grpc_tls = None
            if config.tls_cert_file and config.tls_key_file:
                grpc_tls = (Path(config.tls_cert_file).read_bytes(),
                            Path(config.tls_key_file).read_bytes(),
                            Path(config.tls_client_ca_file).read_bytes()
                            if config.tls_client_ca_file else None)
            address = host_port(config.grpc_endpoint, "receivers.grpc")
            with _naming("receivers.grpc", config.grpc_endpoint):
                self._grpc, self.grpc_port = grpc_receiver(address, self, limits, tls=grpc_tls)
        if config.http_endpoint is not None:
            with _naming("receivers.http", config.http_endpoint):
                sock = listen(host_port(config.http_endpoint, "receivers.http"))
            server = http_receiver(sock, self, limits, tls)
            self._servers.append(server)
            self.http_port = server.port
        if config.health_endpoint is not None:
            with _naming("receivers.health", config.health_endpoint):
                sock = listen(host_port(config.health_endpoint, "receivers.health"))
            health = health_server(sock, self, limits)
            self._servers.append(health)
            self.health_port = health.port
        for server in self._servers:
            server.start()

    def _close_receivers(self) -> None:
        grpc_server, self._grpc = self._grpc, None
        if grpc_server is not None:
            grpc_server.stop(grace=2.0).wait(timeout=5)
        servers, self._servers = self._servers, []
        for server in servers:
            try:
                server.close()
            except Exception:  # noqa: BLE001 - best effort at shutdown: the others still close
                _log.debug("tracescore: closing a receiver failed", exc_info=True)

    def _close_quietly(self) -> None:
        self._close_receivers()
        if self._engine is not None:
            self._engine.shutdown(0.5)
        for forwarder in (self._forwarder, self._logs):
            if forwarder is not None:
                forwarder.stop(timeout_s=1.0)
        if self._journal is not None:
            self._journal.close()
        self._close_telemetry()


@contextmanager
def _naming(key: str, endpoint: str) -> Iterator[None]:
    """Turn a failed bind into a `ConfigurationError` that names the setting."""
    try:
        yield
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise ConfigurationError(f"{key}: {endpoint} is already in use") from None
        reason = exc.strerror or str(exc)
        raise ConfigurationError(f"{key}: cannot listen on {endpoint}: {reason}") from None


def _sender(config: GatewayConfig, signal: str = "traces") -> Sender:
    """The next hop's sender of `signal` ("traces" or "logs"; the endpoint was validated with
    the config): the logs of an OTLP/HTTP next hop go to /v1/logs beside its /v1/traces."""
    from tracescore._endpoints import TRACES_PATH, grpc_address, grpc_target, http_traces_url

    endpoint = config.exporter_endpoint
    if config.exporter_protocol == "grpc":
        url, insecure = grpc_target(endpoint, "exporter.endpoint")
        extra = {"method": GRPC_LOGS_METHOD} if signal == "logs" else {}
        return GrpcSender(grpc_address(url), secure=not insecure,
                          headers=config.exporter_headers, compression=config.exporter_compression,
                          timeout_s=config.exporter_timeout_s, ca_file=config.exporter_ca_file,
                          **extra)
    url = http_traces_url(endpoint, "exporter.endpoint")
    if signal == "logs":
        url = url.rstrip("/").removesuffix(TRACES_PATH) + "/v1/logs"
    return HttpSender(url,
                      headers=config.exporter_headers, compression=config.exporter_compression,
                      timeout_s=config.exporter_timeout_s, ca_file=config.exporter_ca_file)
