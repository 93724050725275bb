"""`tracescore rescore`: the gateway's engine over stored traces (OTLP JSON lines, as written by
tracescore's file exporter and the Collector's file exporter), to a file or an OTLP endpoint.

A span that already carries a result of a scorer at the same version (`tracescore.scorer.version`)
is not scored by it again unless `force`; new results are added beside the old ones. `dry_run`
runs the same selection with stand-ins that never call a judge (`_rescore_estimate`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracescore._exceptions import ConfigurationError
from tracescore._otlp_json import to_otlp_json
from tracescore._private_files import open_private
from tracescore.gateway import _otlp
from tracescore.gateway._engine import Engine
from tracescore.gateway._metrics import GatewayMetrics
from tracescore.gateway._rescore_estimate import Estimate, ScorerEstimate
from tracescore.gateway._rescore_input import LineReader
from tracescore.gateway._rescore_seen import Seen
from tracescore.scoring._resolve import preflight_scorers

_log = logging.getLogger("tracescore.rescore")
# scorers that compare the output with the ground truth, and with something else without one
@dataclass(frozen=True)
class MissingReference:
    """Agent spans a scorer scored without a ground truth, and what it did instead."""

    spans: int
    fallback: str
    has_reference: bool  # the scorer has a `reference` (that did not know these inputs)

    def warning(self, scorer_id: str) -> str:
        """One line: how many, what the scorer did instead, where a ground truth comes from."""
        where = ("neither the spans (tracescore.ground_truth) nor its reference: file had one"
                 if self.has_reference else "the spans carry no tracescore.ground_truth attribute")
        plural = "s" if self.spans != 1 else ""
        return (f"{scorer_id} had no ground truth for {self.spans} agent span{plural} and "
                f"{self.fallback}: {where}. Give the expected answers as a dataset file (input, "
                f"ground_truth) with `reference: FILE` on this scorer under scoring.scorers in "
                f"--config, or record them on the spans as tracescore.ground_truth")


@dataclass(frozen=True)
class RescoreSummary:
    """What a rescore run read, offered for scoring and wrote. `spans_delivered` of the
    `spans_written` reached the output; `undelivered` says why the others did not ("": all did).
    `skipped`: scorer runs not made, the span carrying that scorer version's result already;
    `rescored`: runs on spans with a result of the same scorer (another version, or `force`);
    `estimates`: a dry run's, per scorer."""

    spans_read: int
    spans_selected: int
    agent_spans: int
    spans_written: int
    stats: dict[str, int]
    spans_delivered: int = 0
    undelivered: str = ""
    no_reference: dict[str, MissingReference] = field(default_factory=dict)  # by scorer id
    skipped: int = 0
    rescored: int = 0
    estimates: tuple[ScorerEstimate, ...] = ()
    runs_scored: int = 0  # runs given to run-scope scorers (at their root agent span)
    conversations_scored: int = 0  # conversation versions given to conversation scorers
    scopes: frozenset[str] = frozenset()  # "runs", "conversations": scorers of those scopes
    unreadable: int = 0  # agent-like spans not read (each kind logged once, as `serve` does)

    @property
    def unscored(self) -> dict[str, int]:
        """Scorer runs not made, by reason (`no_llm_calls`, `timeout`, ...)."""
        return {key.split(".", 1)[1]: count for key, count in self.stats.items()
                if key.startswith("dropped.") and count}


class FileOutput:
    """Writes each finished request as one OTLP JSON line."""

    def __init__(self, path: Path) -> None:
        try:
            self._file: IO[str] = open_private(path, "w")
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


class _Nowhere:
    """A dry run's output: takes the spans and keeps none."""

    def put(self, ids: tuple[int, ...], body: bytes, count: int) -> None:
        pass


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
            trace_options: dict[str, Any] | None = None,
            warn: Callable[[str], None] | None = None,
            force: bool = False, dry_run: bool = False,
            run_options: dict[str, Any] | None = None,
            conversations: dict[str, Any] | None = None) -> RescoreSummary:
    """Score the agent spans of `paths` again and write them (all spans with `all_spans`).

    Reading waits while as many spans are held as the processor may hold at once, so a large
    file never pushes a span out unscored for lack of room. Scorers get the tool calls and
    context of the spans of each trace read before its agent span (`trace_options`: the
    gateway's `trace:` bounds). `warn` (default: a log warning) gets each line without spans;
    `no_reference` of the summary counts, per scorer that compares with a ground truth, the
    spans that had none. A bad line raises `ConfigurationError` "FILE:LINE: ...". A scorer skips
    a span with its own version's result (`force`: scores it again); `dry_run` calls no judge and
    estimates instead (`estimates`), giving `output` the spans as they came.

    The files are complete: runs (`run_options`, the `runs:` bounds) and conversations
    (`conversations`, the `conversations:` settings) are scored at the end of the input, not
    after a wall-clock quiet period; a run-scope result at the same version on the root agent
    span skips that run like any span.
    """
    from tracescore.online.core import as_online_scorers

    counting = _Counting(output)
    watched = [_watch_reference(online) for online in as_online_scorers(scorers)]
    chosen = [online for online, _ in watched]
    stand_ins = [Estimate(online.scorer) for online in chosen] if dry_run else []
    if dry_run:  # the same selection, with stand-ins that never call a judge and results
        # that go nowhere but the span (which `output` discards): no carrier, log record or
        # result sink (Phoenix) is built or reached
        chosen = [replace(online, scorer=e, sinks=("span",))
                  for online, e in zip(chosen, stand_ins)]
    # the input is complete: scoring gets the whole `timeout_s` at its end (the gateway's
    # shutdown bound would drop the runs still waiting for a judge starting up)
    options = {"max_wait_s": 600.0, **(processor_options or {}), "shutdown_timeout_s": timeout_s,
               **({"isolation": "thread"} if dry_run else {})}
    seen = Seen(force)
    metrics = GatewayMetrics()
    engine = Engine(scorers=chosen, recognisers=recognisers,
                    output=counting, metrics=metrics, processor_options=options,
                    pass_through=all_spans, trace_options=trace_options, keep=seen,
                    run_options=_at_end(run_options), conversations=_at_end(conversations),
                    live=False)
    seen.run_ids = frozenset(online.scorer_id for online in engine.core.run_scorers)
    if engine.core.conversations is not None:
        engine.core.conversations.keep = seen.conversation
    room = max(1, int(options.get("max_held_spans", 2048)) // 2)
    total = sum(path.stat().st_size for path in paths if path.is_file())
    reader = LineReader(paths, warn or _log.warning)
    read = selected = 0
    try:
        for request, done in reader.requests():
            read += _otlp.count_spans(request)
            seen.read_carriers(request)
            select(request, since_ns, until_ns)
            selected += _otlp.count_spans(request)
            while engine.held >= room:
                time.sleep(0.005)
            engine.accept(request)
            if progress is not None:
                progress(done, total)
        engine.end_of_input()  # spans waiting for LLM calls the input does not hold: as `serve`
    finally:
        engine.shutdown(timeout_s)
    stats = engine.core.stats()
    missing = {online.scorer_id: MissingReference(watch.missing, watch.fallback,
                                                  watch.has_reference)
               for online, watch in watched if watch is not None and watch.missing}
    return RescoreSummary(read, selected, engine.offered, counting.written, stats,
                          spans_delivered=counting.written, no_reference=missing,
                          skipped=seen.skipped, rescored=seen.rescored,
                          estimates=tuple(e.summary() for e in stand_ins),
                          runs_scored=seen.runs,
                          conversations_scored=len(seen.conversations),
                          scopes=frozenset(name for name, on in (
                              ("runs", bool(engine.core.run_scorers)),
                              ("conversations", engine.core.conversations is not None)) if on),
                          unreadable=int(sum(metrics.labelled("unreadable_agent_spans").values())))


_NEVER = 1e9  # seconds: a stored run or conversation waits for the end of the input


def _at_end(options: dict[str, Any] | None) -> dict[str, Any]:
    """Scope settings with no wall-clock quiet period or age limit (the size bounds stay)."""
    return {**(options or {}), "quiet_s": _NEVER, "max_age_s": _NEVER}


class _ReferenceWatch:
    """The `reference` of an OnlineScorer, counting the lookups that found no ground truth
    (the processor asks only for spans without their own)."""

    def __init__(self, online: Any, fallback: str) -> None:
        self._lookup = online.lookup_reference
        self.fallback = fallback
        self.has_reference = online.reference is not None
        self._lock = threading.Lock()
        self.missing = 0

    def __call__(self, value: Any) -> Any:
        found = self._lookup(value)
        if found is None:
            with self._lock:
                self.missing += 1
        return found


def _watch_reference(online: Any) -> tuple[Any, _ReferenceWatch | None]:
    """`online` with its reference lookups counted, when its verdicts change without one."""
    from tracescore.online.core import reference_fallback

    fallback = reference_fallback(online.scorer_id, online.scorer)
    if fallback is None:
        return online, None
    watch = _ReferenceWatch(online, fallback)
    return replace(online, reference=watch), watch


class _EndpointOutput:
    """The forwarder to an OTLP endpoint, and what became of the spans given to it."""

    def __init__(self, config: Any) -> None:
        from tracescore.gateway._forward import Forwarder
        from tracescore.gateway._gateway import _sender

        self.endpoint = str(config.exporter_endpoint)
        self._sender = _LastFailure(_sender(config))
        self._metrics = GatewayMetrics()
        self._forwarder = Forwarder(self._sender, None, self._metrics,
                                    max_batch_spans=config.max_batch_spans)
        self._drain_s = float(config.shutdown_timeout_s)
        self._forwarder.start()
        self._lock = threading.Lock()
        self.written = 0  # spans given to the forwarder

    def put(self, ids: tuple[int, ...], body: bytes, count: int) -> None:
        self._forwarder.put(ids, body, count)
        with self._lock:
            self.written += count

    def finish(self) -> tuple[int, str]:
        """Wait (up to `shutdown_timeout_s`) for the endpoint; (spans delivered, why not all)."""
        written = self.written
        drained = self._forwarder.drain(self._drain_s)
        self._forwarder.stop()
        counts = self._metrics.snapshot()
        delivered = min(written, int(counts.get("forwarded", 0)))
        rejected = int(counts.get("rejected_by_next_hop", 0))
        if delivered >= written:
            return written, ""
        failure = self._sender.failure
        if rejected and (failure is None or failure.ok):
            why = f"the endpoint {self.endpoint} rejected {rejected} (partial success)"
        elif failure is not None and not failure.retry:
            why = f"the endpoint {self.endpoint} rejected them ({failure.detail}; not retried)"
        else:
            why = f"the endpoint {self.endpoint} {self._diagnosis(failure)}"
        if not drained:
            why += f"; gave up after {self._drain_s:g} s (shutdown_timeout_s)"
        return delivered, why

    def _diagnosis(self, failure: Any) -> str:
        """What went wrong with a retryable failure: the TCP connection, or the answer."""
        import socket
        from urllib.parse import urlsplit

        detail = failure.detail if failure is not None else "no answer"
        url = self.endpoint if "://" in self.endpoint else f"http://{self.endpoint}"
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 4317)
        try:
            with socket.create_connection((parts.hostname or "", port), timeout=2.0):
                pass
        except ConnectionRefusedError:
            return "refused the connection"
        except socket.gaierror:
            return f"could not be found (no such host {parts.hostname!r})"
        except OSError as exc:
            return f"could not be reached ({exc.strerror or type(exc).__name__})"
        return f"answered {detail} (retried)"


class _LastFailure:
    """A sender that remembers the last answer that was not a plain success."""

    def __init__(self, sender: Any) -> None:
        self._sender = sender
        self.failure: Any = None

    def send(self, body: bytes, timeout_s: float | None = None) -> Any:
        outcome = self._sender.send(body, timeout_s)
        if not outcome.ok or outcome.rejected_spans:
            self.failure = outcome
        return outcome

    def close(self) -> None:
        self._sender.close()


def run_rescore_command(inputs: Sequence[Path], *, config_file: Path | None,
                        scorer_names: Sequence[str], judge_model: str | None,
                        agents: Sequence[str], rate: float | None, since: datetime | None,
                        until: datetime | None, output: Path | None, endpoint: str | None,
                        protocol: str, all_spans: bool, progress: bool,
                        warn: Callable[[str], None] | None = None, force: bool = False,
                        dry_run: bool = False) -> RescoreSummary:
    """The `tracescore rescore` command (options validated here, `ConfigurationError` if bad:
    also when the inputs hold no span at all). A dry run writes and sends nothing."""
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
    preflight_scorers(scorers)  # a dry run too: it estimates what the real run would do
    options = processor_options(with_overrides(config, max_wait_s=max(config.max_wait_s, 600.0)))
    sink: FileOutput | _EndpointOutput | _Nowhere = (
        _Nowhere() if dry_run else FileOutput(output) if output is not None
        else _EndpointOutput(config))
    bar = _progress() if progress else None
    delivered, why = 0, ""
    try:
        summary = rescore(inputs, scorers=scorers, recognisers=config.recognisers or (),
                          output=sink, since_ns=_ns(since), until_ns=_ns(until),
                          all_spans=all_spans, processor_options=options,
                          progress=bar.update if bar else None,
                          trace_options=dict(config.trace), warn=warn, force=force,
                          dry_run=dry_run, run_options=dict(config.runs),
                          conversations=dict(config.conversations))
    finally:
        if bar is not None:
            bar.close()
        if isinstance(sink, FileOutput):
            sink.close()
        elif isinstance(sink, _EndpointOutput):
            delivered, why = sink.finish()
    if not isinstance(sink, _EndpointOutput):
        delivered = summary.spans_written
    if not summary.spans_read:
        names = ", ".join(str(path) for path in inputs)
        raise ConfigurationError(f"{names}: no spans found; nothing to rescore (expected OTLP "
                                 f"JSON lines with resourceSpans, as the file exporters write)")
    return replace(summary, spans_delivered=delivered, undelivered=why)


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
