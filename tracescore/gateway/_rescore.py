"""`tracescore rescore`: the gateway's engine over stored traces (OTLP JSON lines, as written by
tracescore's file exporter and the Collector's file exporter), to a file or an OTLP endpoint."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracescore._exceptions import ConfigurationError
from tracescore._otlp_json import parse_otlp_json, to_otlp_json
from tracescore.gateway import _otlp
from tracescore.gateway._engine import Engine
from tracescore.gateway._metrics import GatewayMetrics


@dataclass(frozen=True)
class RescoreSummary:
    """What a rescore run read, offered for scoring and wrote."""

    spans_read: int
    spans_selected: int
    agent_spans: int
    spans_written: int
    stats: dict[str, int]


class FileOutput:
    """Writes each finished request as one OTLP JSON line."""

    def __init__(self, path: Path) -> None:
        try:
            self._file: IO[str] = path.open("w", encoding="utf-8")
        except OSError as exc:
            raise ConfigurationError(f"--output: cannot write {str(path)!r}: {exc}") from None
        self._lock = threading.Lock()
        self.written = 0

    def put(self, ids: tuple[int, ...], body: bytes, count: int) -> None:
        line = to_otlp_json(ExportTraceServiceRequest.FromString(body))
        with self._lock:
            self._file.write(line + "\n")
            self.written += count

    def close(self) -> None:
        self._file.close()


class _Counting:
    """Counts what reaches another output."""

    def __init__(self, output: Any) -> None:
        self._output = output
        self._lock = threading.Lock()
        self.written = 0

    def put(self, ids: tuple[int, ...], body: bytes, count: int) -> None:
        self._output.put(ids, body, count)
        with self._lock:
            self.written += count


def read_requests(paths: Sequence[Path]) -> Iterator[tuple[ExportTraceServiceRequest, int]]:
    """Each line of each file as a request, with the bytes read so far (for progress)."""
    done = 0
    for path in paths:
        try:
            handle = path.open("rb")
        except OSError as exc:
            raise ConfigurationError(f"{path}: cannot read: {exc}") from None
        with handle:
            for number, line in enumerate(handle, 1):
                done += len(line)
                if not line.strip():
                    continue
                try:
                    request = parse_otlp_json(line, ExportTraceServiceRequest())
                except ValueError as exc:
                    raise ConfigurationError(
                        f"{path}:{number}: not an OTLP JSON trace request: {exc}") from None
                yield request, done


def select(request: ExportTraceServiceRequest, since_ns: int | None, until_ns: int | None) -> None:
    """Drop spans that started outside [since, until) (in place)."""
    if since_ns is None and until_ns is None:
        return
    low, high = since_ns or 0, until_ns or (1 << 64)
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            keep = [s for s in ss.spans if low <= s.start_time_unix_nano < high]
            if len(keep) != len(ss.spans):
                del ss.spans[:]
                ss.spans.extend(keep)


def rescore(paths: Sequence[Path], *, scorers: Sequence[Any], recognisers: Sequence[Any],
            output: Any, since_ns: int | None = None, until_ns: int | None = None,
            all_spans: bool = False, processor_options: dict[str, Any] | None = None,
            progress: Callable[[int, int], None] | None = None,
            timeout_s: float = 600.0,
            trace_options: dict[str, Any] | None = None) -> RescoreSummary:
    """Score the agent spans of `paths` again and write them (all spans with `all_spans`).

    Reading waits while as many spans are held as the processor may hold at once, so a large
    file never pushes a span out unscored for lack of room. Scorers get the tool calls and
    context of the spans of each trace read before its agent span (`trace_options`: the
    gateway's `trace:` bounds).
    """
    counting = _Counting(output)
    options = {"max_wait_s": 600.0, **(processor_options or {})}
    engine = Engine(scorers=scorers, recognisers=recognisers, output=counting,
                    metrics=GatewayMetrics(), processor_options=options, pass_through=all_spans,
                    trace_options=trace_options)
    room = max(1, int(options.get("max_held_spans", 2048)) // 2)
    total = sum(path.stat().st_size for path in paths if path.is_file())
    read = selected = 0
    try:
        for request, done in read_requests(paths):
            read += _otlp.count_spans(request)
            select(request, since_ns, until_ns)
            selected += _otlp.count_spans(request)
            while engine.held >= room:
                time.sleep(0.005)
            engine.accept(request)
            if progress is not None:
                progress(done, total)
    finally:
        engine.shutdown(timeout_s)
    stats = engine.processor.stats()
    return RescoreSummary(read, selected, engine.offered, counting.written, stats)


def run_rescore_command(inputs: Sequence[Path], *, config_file: Path | None,
                        scorer_names: Sequence[str], judge_model: str | None,
                        agents: Sequence[str], rate: float | None, since: datetime | None,
                        until: datetime | None, output: Path | None, endpoint: str | None,
                        protocol: str, all_spans: bool, progress: bool) -> RescoreSummary:
    """The `tracescore rescore` command (options validated here, `ConfigurationError` if bad)."""
    from tracescore._endpoints import check_endpoint
    from tracescore.gateway._config import (
        load_gateway_config,
        processor_options,
        with_overrides,
    )

    overrides: dict[str, Any] = {}
    if scorer_names:
        overrides["scoring.scorers"] = [{"scorer": name} for name in scorer_names]
    if judge_model:
        overrides["scoring.judge_model"] = judge_model
    if endpoint:
        check_endpoint(endpoint, protocol, "--endpoint")
        overrides.update({"exporter.endpoint": endpoint, "exporter.protocol": protocol})
    config = load_gateway_config(config_file, overrides, environ={})
    changes: dict[str, Any] = {}
    if rate is not None:
        changes["rate"] = rate
    if agents:
        changes["agents"] = tuple(agents)
    scorers = [replace(online, **changes) for online in config.scorers or ()]
    options = processor_options(with_overrides(config, max_wait_s=max(config.max_wait_s, 600.0)))
    sink: Any
    forwarder = None
    if output is not None:
        sink = FileOutput(output)
    else:
        from tracescore.gateway._forward import Forwarder
        from tracescore.gateway._gateway import _sender

        forwarder = Forwarder(_sender(config), None, GatewayMetrics(),
                              max_batch_spans=config.max_batch_spans)
        forwarder.start()
        sink = forwarder
    bar = _progress() if progress else None
    try:
        summary = rescore(inputs, scorers=scorers, recognisers=config.recognisers or (),
                          output=sink, since_ns=_ns(since), until_ns=_ns(until),
                          all_spans=all_spans, processor_options=options,
                          progress=bar.update if bar else None,
                          trace_options=dict(config.trace))
    finally:
        if bar is not None:
            bar.close()
        if isinstance(sink, FileOutput):
            sink.close()
        if forwarder is not None:
            forwarder.drain(config.shutdown_timeout_s)
            forwarder.stop()
    return summary


class _progress:
    """A rich progress bar over the bytes read (on stderr)."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

        self._bar = Progress("rescoring", BarColumn(), DownloadColumn(), TimeRemainingColumn(),
                             console=Console(stderr=True), transient=True)
        self._task = self._bar.add_task("rescore", total=None)
        self._bar.start()

    def update(self, done: int, total: int) -> None:
        self._bar.update(self._task, completed=done, total=total)

    def close(self) -> None:
        self._bar.stop()


def _ns(moment: datetime | None) -> int | None:
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp() * 1_000_000_000)
