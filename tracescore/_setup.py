"""configure(): tracing set up in one call (resource, exporters, batching, content capture, online scoring).

Each SDK TracerProvider gets exactly one router processor from us. configure() builds a new export
pipeline and swaps it into the router; the previous pipeline is flushed and shut down, so calling
configure() again never exports a span twice and never touches processors the application added.

(About 540 lines: configure(), flush/shutdown and the exit, SIGTERM and fork hooks share the
module's lock, routers and live handles, and the fork hook replaces the lock; apart they would
pass that state around.)
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import (
    ReadableSpan,
    Span,
    SpanProcessor,
    SynchronousMultiSpanProcessor,
    TracerProvider,
)
from opentelemetry.sdk.trace.export import SpanExporter

from tracescore import _exporters
from tracescore._exceptions import ConfigurationError
from tracescore._export_pipeline import ExportLimits, GuardedExporter, export_processor

__all__ = ["TracescoreHandle", "configure", "flush", "shutdown"]

_log = logging.getLogger(__name__)

ExporterSpec = str | SpanExporter
_EXIT_TIMEOUT_S = 10.0  # total time the interpreter-exit flush may take

_lock = threading.RLock()
_routers: weakref.WeakKeyDictionary[TracerProvider, _Router] = weakref.WeakKeyDictionary()
_handles: list[TracescoreHandle] = []  # live handles, newest last
_atexit_registered = False


class _Router(SpanProcessor):
    """The one processor we add to a provider; forwards to the current pipeline, which can be swapped."""

    def __init__(self) -> None:
        self.target: SpanProcessor | None = None

    def swap(self, target: SpanProcessor | None) -> SpanProcessor | None:
        old, self.target = self.target, target
        return old

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        target = self.target
        if target is not None:
            target.on_start(span, parent_context=parent_context)

    def _on_ending(self, span: Span) -> None:
        target = self.target
        if target is not None:
            target._on_ending(span)

    def on_end(self, span: ReadableSpan) -> None:
        target = self.target
        if target is not None:
            target.on_end(span)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        target = self.target
        return True if target is None else target.force_flush(timeout_millis)

    def shutdown(self) -> None:  # the provider is shutting down: so does the current pipeline
        target = self.swap(None)
        if target is not None:
            target.shutdown()


class _Lease(SpanExporter):
    """A caller's SpanExporter inside one pipeline; the exporter is shut down with its last pipeline,
    so configure(exporter=same_instance) twice does not close the instance the new pipeline uses."""

    _counts: ClassVar[dict[int, int]] = {}

    def __init__(self, exporter: SpanExporter) -> None:
        self.exporter = exporter
        self._released = False
        with _lock:
            self._counts[id(exporter)] = self._counts.get(id(exporter), 0) + 1

    def export(self, spans: Sequence[ReadableSpan]) -> Any:
        return self.exporter.export(spans)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.exporter.force_flush(timeout_millis)

    def shutdown(self) -> None:
        with _lock:
            if self._released:
                return
            self._released = True
            left = self._counts[id(self.exporter)] = self._counts[id(self.exporter)] - 1
            if left == 0:
                del self._counts[id(self.exporter)]
        if left == 0:
            self.exporter.shutdown()


def _unwrap(exporter: SpanExporter) -> SpanExporter:
    """The caller's exporter inside a _Lease, or `exporter` itself."""
    return exporter.exporter if isinstance(exporter, _Lease) else exporter


class TracescoreHandle:
    """What configure() returns: the provider in use, flush/shutdown of this pipeline and its stats()."""

    def __init__(self, tracer_provider: TracerProvider, router: _Router, pipeline: SpanProcessor,
                 guards: Sequence[GuardedExporter]) -> None:
        self._provider = tracer_provider
        self._router = router
        self._pipeline = pipeline
        self._guards = tuple(guards)
        self.exporters: tuple[SpanExporter, ...] = tuple(_unwrap(g.exporter) for g in guards)
        self._closed = False

    @property
    def tracer_provider(self) -> TracerProvider:
        """The SDK TracerProvider spans flow through (yours, the global one, or one we created)."""
        return self._provider

    @property
    def active(self) -> bool:
        """False once shut down or replaced by a later configure() on the same provider."""
        return not self._closed and self._router.target is self._pipeline

    def flush(self, timeout: float = 30.0) -> bool:
        """Export everything finished so far (scoring included).

        False if `timeout` ran out, or if any span failed to export since the previous flush()
        (the failure is logged with the number of spans lost); never raises.
        """
        if self._closed:
            return True
        pipeline = self._pipeline
        refusing = [guard for guard in self._guards if _refuses(guard)]
        for guard in refusing:  # not retried with backoff for seconds: it is down now
            guard.skip("it refuses connections; not retried")
        try:
            done = _bounded(lambda: bool(pipeline.force_flush(max(0, int(timeout * 1000)))),
                            timeout, "flush")
        finally:
            for guard in refusing:
                guard.skip(None)
        failed = 0
        for guard in self._guards:
            failed += _report_undelivered(guard, "since the last flush",
                                          "it refuses connections; not retried"
                                          if guard in refusing else None)
        return done and not failed

    def stats(self) -> dict[str, int]:
        """Counters of this pipeline, summed over its exporters: `export.exported`, `export.failed`
        (spans), `export.truncated` (spans cut to max_span_bytes), `export.requests`; with online
        scoring also the counters of `ScoringSpanProcessor.stats()`."""
        counts = dict.fromkeys(("export.exported", "export.failed", "export.truncated",
                                "export.requests"), 0)
        for guard in self._guards:
            for key, value in guard.stats().items():
                counts[f"export.{key}"] += value
        if _is_scoring(self._pipeline):
            counts.update(self._pipeline.stats())  # type: ignore[attr-defined]
        return counts

    def shutdown(self, timeout: float = 30.0) -> None:
        """Detach this pipeline from the provider, export what it still has (online scoring waits
        for pending scores; spans it still holds go out with reason "shutdown") and close its
        exporters, within `timeout` seconds. Idempotent.

        The provider itself stays usable (other processors keep working; configure() can run again).
        """
        self._close(timeout, "shutdown")

    def _close(self, timeout: float, when: str) -> None:
        """`shutdown`; an OTLP endpoint that refuses connections is not retried for seconds,
        and one line per exporter says what was lost (`when`: "shutdown" or "exit")."""
        with _lock:
            if self._closed:
                return
            self._closed = True
            if self._router.target is self._pipeline:
                self._router.swap(None)
            if self in _handles:
                _handles.remove(self)
        for guard in self._guards:
            if _refuses(guard):
                guard.give_up("it refuses connections")
        _close_pipeline(self._pipeline, timeout)
        for guard in self._guards:
            _report_undelivered(guard, "", f"{guard.gave_up}; not retried at {when}"
                                if guard.gave_up else None)


def _bounded(work: Callable[[], bool], timeout: float, what: str) -> bool:
    """Run `work` in a daemon thread and wait at most `timeout` s (the SDK's batch flush ignores its
    timeout and blocks while an exporter retries). False on timeout or error; never raises."""
    outcome: list[bool] = []

    def run() -> None:
        try:
            outcome.append(work())
        except Exception:  # noqa: BLE001 - telemetry never raises into the app
            _log.exception("tracescore: %s failed", what)
            outcome.append(False)

    worker = threading.Thread(target=run, name=f"tracescore-{what}", daemon=True)
    worker.start()
    worker.join(max(0.0, timeout))
    if worker.is_alive():
        _log.warning("tracescore: %s did not finish within %.1fs", what, timeout)
        return False
    return outcome[0]


def _close_pipeline(pipeline: SpanProcessor, timeout: float) -> None:
    """Shut `pipeline` down, bounded by `timeout` seconds overall.

    Online scoring shuts down by itself within the timeout (what it still holds is exported with
    reason "shutdown", not "flush"); a plain export pipeline is flushed first.
    """
    timeout_ms = max(0, int(timeout * 1000))

    def close() -> bool:
        if _is_scoring(pipeline):
            pipeline.shutdown(timeout_millis=timeout_ms)  # type: ignore[call-arg]
        else:
            pipeline.force_flush(timeout_ms)
            pipeline.shutdown()
        return True

    _bounded(close, timeout, "shutdown")


def _is_scoring(pipeline: SpanProcessor) -> bool:
    module = sys.modules.get("tracescore.online._processor")  # never imported: no scoring
    return module is not None and isinstance(pipeline, module.ScoringSpanProcessor)


def configure(
    *,
    service_name: str | None = None,
    exporter: ExporterSpec | Sequence[ExporterSpec] | None = None,
    endpoint: str | None = None,
    headers: Mapping[str, str] | str | None = None,
    compression: str | None = None,
    file_path: str | os.PathLike[str] | None = None,
    resource_attributes: Mapping[str, Any] | None = None,
    batch: bool = True,
    max_span_bytes: int | None = None,
    max_request_bytes: int | None = None,
    flush_on_sigterm: bool | None = None,
    capture_content: bool | None = None,
    max_content_length: int | None = None,
    redact: bool | None = None,
    redaction_hook: Callable[[str], str] | None = None,
    openinference: bool | None = None,
    scorers: Any = None,
    online: Mapping[str, Any] | None = None,
    tracer_provider: TracerProvider | None = None,
) -> TracescoreHandle:
    """Set up tracing: resource, exporter(s), batching, content capture and optional online scoring.

    exporter: "otlp" (protocol from OTEL_EXPORTER_OTLP_PROTOCOL, default http/protobuf), "otlp-http",
    "otlp-grpc", "console", "file" (OTLP JSON lines at `file_path`), "none", a SpanExporter, or a list
    of these. Default: OTEL_TRACES_EXPORTER, else "otlp". endpoint/headers/compression left as None
    are read by the OTLP exporters from the standard OTEL_EXPORTER_OTLP_(TRACES_)* variables.
    openinference=True also puts agent input/output on `input.value` / `output.value` (Phoenix's
    input and output columns); default from TRACESCORE_OPENINFERENCE, else off.

    An existing SDK TracerProvider (`tracer_provider`, else the global one) is extended, not replaced.
    Calling configure() again replaces the previous pipeline on that provider (no double export).

    Spans are exported from a background thread (batch=False: each within 2 ms of its end). A span larger
    than `max_span_bytes` (default 1 MiB, env TRACESCORE_MAX_SPAN_BYTES) has its largest values cut
    and is marked `tracescore.span.truncated`; export requests stay under `max_request_bytes`
    (default 3 MiB, env TRACESCORE_MAX_REQUEST_BYTES).
    `flush_on_sigterm` (default on, env TRACESCORE_FLUSH_ON_SIGTERM): on SIGTERM, export what is
    batched or held (bounded, 10 s), then run the handler that was installed before, or exit as
    SIGTERM does by default.
    Raises ConfigurationError for invalid arguments.
    """
    specs = _exporter_specs(exporter)
    limits = ExportLimits.resolve(max_span_bytes, max_request_bytes)
    if flush_on_sigterm is not None and not isinstance(flush_on_sigterm, bool):
        raise ConfigurationError(f"flush_on_sigterm must be True, False or None (got {flush_on_sigterm!r})")
    headers_ = _exporters.check_headers(headers)
    compression_ = _exporters.check_compression(compression)
    has_otlp = any(isinstance(s, str) and _exporters.is_otlp(s) for s in specs)
    if not has_otlp and (endpoint is not None or headers_ is not None or compression_ is not None):
        raise ConfigurationError("endpoint/headers/compression apply only to OTLP exporters "
                                 f"(exporters chosen: {_describe(specs)})")
    if file_path is not None and "file" not in specs:
        raise ConfigurationError('file_path applies only to exporter="file"')
    if online is not None and not _scorer_list(scorers):
        raise ConfigurationError("online= options need scorers=")
    if tracer_provider is not None and not isinstance(tracer_provider, TracerProvider):
        raise ConfigurationError("tracer_provider must be an opentelemetry.sdk.trace.TracerProvider "
                                 f"(got {type(tracer_provider).__name__})")
    if service_name is not None and (not isinstance(service_name, str) or not service_name):
        raise ConfigurationError(f"service_name must be a non-empty string (got {service_name!r})")
    if endpoint is not None and not isinstance(endpoint, str):
        raise ConfigurationError(f"endpoint must be a string (got {endpoint!r})")
    if tracer_provider is None:  # refuse before building anything (scoring starts listening)
        _check_global(trace.get_tracer_provider())
    resource = _resource(service_name, resource_attributes)
    scorer_list = _scorer_list(scorers)
    _warn_unready(scorer_list, online)

    built: list[GuardedExporter] = []
    pipeline: SpanProcessor | None = None
    try:
        for spec in specs:
            exp = _Lease(spec) if isinstance(spec, SpanExporter) else _exporters.build_exporter(
                spec, endpoint=endpoint, headers=headers_, compression=compression_,
                file_path=file_path)
            if exp is not None:
                built.append(GuardedExporter(exp, limits))
        pipeline = _pipeline(built, batch)
        if scorer_list:
            pipeline = _scoring(pipeline, scorer_list, online)
        _set_content_options(capture_content, max_content_length, redact, redaction_hook,
                             openinference)
    except BaseException:
        if pipeline is not None:
            pipeline.shutdown()
        else:
            for exp in built:
                exp.shutdown()
        raise

    with _lock:
        provider = _provider(tracer_provider, resource, service_name)
        router = _routers.get(provider)
        if router is None:
            router = _routers[provider] = _Router()
            provider.add_span_processor(router)
        old = router.swap(pipeline)
        handle = TracescoreHandle(provider, router, pipeline, built)
        for previous in [h for h in _handles if h._router is router]:
            previous._closed = True
            _handles.remove(previous)
        _handles.append(handle)
        _register_atexit()
    _handle_sigterm(flush_on_sigterm)
    if old is not None:
        _close_pipeline(old, _EXIT_TIMEOUT_S)
    return handle


def flush(timeout: float = 30.0) -> bool:
    """Flush the most recent configure() pipeline (see `TracescoreHandle.flush`): False if the time ran
    out or spans failed to export since the previous flush; True when there is none."""
    handle = _handles[-1] if _handles else None
    return True if handle is None else handle.flush(timeout)


def shutdown(timeout: float = 30.0) -> None:
    """Shut down the most recent configure() pipeline (see `TracescoreHandle.shutdown`); no-op when
    there is none."""
    handle = _handles[-1] if _handles else None
    if handle is not None:
        handle.shutdown(timeout)


def _exporter_specs(exporter: ExporterSpec | Sequence[ExporterSpec] | None) -> list[ExporterSpec]:
    if exporter is None:
        raw: list[Any] = list(_exporters.default_exporter_names())
    elif isinstance(exporter, (str, SpanExporter)):
        raw = [exporter]
    elif isinstance(exporter, Sequence):
        raw = list(exporter)
        if not raw:
            raise ConfigurationError('exporter=[] names no exporter; use exporter="none" to export nothing')
    else:
        raise ConfigurationError(f"exporter must be a name, a SpanExporter or a list (got {exporter!r})")
    specs: list[ExporterSpec] = []
    for item in raw:
        if isinstance(item, SpanExporter):
            specs.append(item)
        elif isinstance(item, str) and item.strip().lower() in _exporters.EXPORTER_NAMES:
            specs.append(item.strip().lower())
        else:
            raise ConfigurationError(f"unknown exporter {item!r}; use one of "
                                     f"{', '.join(_exporters.EXPORTER_NAMES)} or a SpanExporter")
    return specs


def _warn_unready(scorers: list[Any], online: Any) -> None:
    """Log, once per scorer, a judge that cannot work (no API key, unknown model): its results
    will be failures (`error.type` on the result event, no score), never an exception here.
    Where the judge runs in the scoring process and litellm is not loaded here, only what can be
    told without loading it (a common provider's missing key): the agent's process stays free
    of litellm."""
    from tracescore.scoring._resolve import unready_judges

    isolation = (online.get("isolation", "auto") if isinstance(online, Mapping)
                 else getattr(online, "isolation", "auto"))
    load = "litellm" in sys.modules or isolation == "thread"
    for problem in unready_judges(scorers, load_clients=load):
        logging.getLogger("tracescore").warning(
            "tracescore: %s; its results will be failures (error.type on the "
            "gen_ai.evaluation.result event, no score) until that is fixed", problem)


def _scorer_list(scorers: Any) -> list[Any]:
    """Scorers, a single one, names of scorers (`"keyword-coverage"`) or specs
    (`{"scorer": "llm-judge", "options": {...}}`) as a list of scorers."""
    from tracescore.scoring._registry import resolve_scorers

    if scorers is None:
        return []
    if isinstance(scorers, (str, bytes)) or not isinstance(scorers, (Sequence, set, frozenset)):
        return resolve_scorers([scorers])  # a single scorer
    return resolve_scorers(list(scorers))


def _scoring(pipeline: SpanProcessor, scorers: list[Any], online: Mapping[str, Any] | None
             ) -> SpanProcessor:
    """Wrap the export pipeline in online scoring (validated by ScoringSpanProcessor itself)."""
    from tracescore.online import ScoringSpanProcessor

    options = dict(online or {})
    try:
        return ScoringSpanProcessor(pipeline, scorers, **options)
    except TypeError as exc:  # unknown option name
        raise ConfigurationError(f"invalid online= options {sorted(options)}: {exc}") from exc


def _describe(specs: Sequence[ExporterSpec]) -> str:
    return ", ".join(s if isinstance(s, str) else type(s).__name__ for s in specs) or "none"


def _resource(service_name: str | None, attributes: Mapping[str, Any] | None) -> Resource:
    attrs: dict[str, Any] = {}
    if attributes is not None:
        if not isinstance(attributes, Mapping):
            raise ConfigurationError(f"resource_attributes must be a mapping (got {attributes!r})")
        attrs.update(attributes)
    if service_name is not None:
        attrs[SERVICE_NAME] = service_name
    return Resource.create(attrs)  # merges OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME


def _set_content_options(capture: bool | None, max_length: int | None, redact: bool | None,
                         hook: Callable[[str], str] | None, openinference: bool | None) -> None:
    if (capture is None and max_length is None and redact is None and hook is None
            and openinference is None):
        return
    from tracescore._config import set_content_capture  # validates and raises ConfigurationError

    kwargs: dict[str, Any] = {"max_length": max_length, "redact": redact,
                              "openinference": openinference}
    if hook is not None:
        kwargs["redaction_hook"] = hook
    set_content_capture(capture, **kwargs)


def _pipeline(exporters: Sequence[GuardedExporter], batch: bool) -> SpanProcessor:
    if not exporters:
        return SpanProcessor()  # "none": spans are still created (scoring may use them), not exported
    if len(exporters) == 1:
        return export_processor(exporters[0], batch)
    fan_out = SynchronousMultiSpanProcessor()
    for exp in exporters:
        fan_out.add_span_processor(export_processor(exp, batch))
    return fan_out


def _provider(given: TracerProvider | None, resource: Resource, service_name: str | None
              ) -> TracerProvider:
    if given is not None:
        provider = given
        if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
            trace.set_tracer_provider(given)  # no global provider yet: decorators need one to reach it
    else:
        current = trace.get_tracer_provider()
        if isinstance(current, trace.ProxyTracerProvider):
            trace.set_tracer_provider(TracerProvider(resource=resource))
            current = trace.get_tracer_provider()  # whoever won a race to set it
        if not isinstance(current, TracerProvider):
            raise ConfigurationError(
                f"the global TracerProvider is a {type(current).__name__}, not an SDK TracerProvider; "
                "pass tracer_provider= explicitly")
        provider = current
    if service_name is not None and provider.resource.attributes.get(SERVICE_NAME) != service_name:
        _log.warning("tracescore: the existing TracerProvider keeps its resource (service.name=%r); "
                     "service_name=%r is not applied", provider.resource.attributes.get(SERVICE_NAME),
                     service_name)
    return provider


def _check_global(current: object) -> None:
    """The same refusal as `_provider`, made before anything is built."""
    if not isinstance(current, (TracerProvider, trace.ProxyTracerProvider)):
        raise ConfigurationError(
            f"the global TracerProvider is a {type(current).__name__}, not an SDK TracerProvider; "
            "pass tracer_provider= explicitly")


def _register_atexit() -> None:
    global _atexit_registered
    if not _atexit_registered:
        atexit.register(_shutdown_at_exit)
        _atexit_registered = True


def _handle_sigterm(wanted: bool | None) -> None:
    from tracescore import _signals
    from tracescore._env import FLUSH_ON_SIGTERM

    if wanted is None:
        wanted = FLUSH_ON_SIGTERM.get()
    if wanted:
        _signals.install(_on_sigterm)
    else:
        _signals.uninstall()


def _on_sigterm(chained: bool) -> None:
    """SIGTERM: flush every live pipeline when the application's handler runs next (it may keep
    working while it drains); shut them down when the default action ends the process next."""
    if not chained:
        _shutdown_at_exit()
        return
    with _lock:
        handles = list(_handles)
    for handle in reversed(handles):
        handle.flush(_EXIT_TIMEOUT_S / max(1, len(handles)))


def _shutdown_at_exit() -> None:
    """Flush and close every live pipeline, within _EXIT_TIMEOUT_S overall. An OTLP endpoint that
    refuses connections is not retried for seconds; one line per exporter says what was lost."""
    with _lock:
        handles = list(_handles)
    per_handle = _EXIT_TIMEOUT_S / max(1, len(handles))
    for handle in reversed(handles):
        handle._close(per_handle, "exit")


def _refuses(guard: GuardedExporter) -> bool:
    """Whether the guard's OTLP endpoint refuses connections now (nothing listens there)."""
    destination = _exporters.otlp_destination(_unwrap(guard.exporter))
    return destination is not None and _exporters.refuses_connections(destination)


def _report_undelivered(guard: GuardedExporter, since: str, why: str | None) -> int:
    """Log one line for the spans `guard` failed to deliver since it was last asked; their
    number."""
    failed = guard.take_failures()
    if failed:
        exporter = _unwrap(guard.exporter)
        where = _exporters.otlp_destination(exporter) or type(exporter).__name__
        _log.warning("tracescore: %d span(s) not delivered to %s%s%s", failed, where,
                     f" {since}" if since else "", f" ({why})" if why else "")
    return failed


def _after_fork_in_child() -> None:
    # a parent thread holding the lock at fork does not exist in the child: a fresh lock
    global _lock
    _lock = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
