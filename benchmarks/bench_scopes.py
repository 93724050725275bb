"""What tracking runs and conversations costs, in process, side by side with tracking off:

  * CPU per call: `@tracescore.agent` calls that carry a conversation id (each call a trace of
    its own, with one tool call below it), under a scoring processor with (a) a call scorer
    only, (b) plus a run-scope scorer (trajectory accuracy), (c) plus a conversation-scope
    scorer; at sampling rate 1 and 0; the whole process's CPU (every thread) and wall time per
    call, in alternating rounds, as ratios to (a). Code scorers only: no judge, no network.
    A conversation's own scoring waits for its quiet period (300 s), so (c) measures the
    tracking: reading the id and keeping the turn.
  * the same in the gateway: the engine of `tracescore serve` fed those calls' spans as OTLP
    requests (one trace a request), with the same three scorer sets: the process's CPU per span.
  * memory of open conversations: N conversations of 3 turns each, all waiting for their quiet
    period, for a baseline N and 10x N, with the default bounds; then 10x N again with
    `max_conversations` (and, separately, `max_bytes`) set to the baseline's size: tracemalloc
    and RSS growth per open conversation, and the conversations scored early by the bound. In the
    gateway's engine with a journal (turns are journaled): memory and journal bytes per open
    conversation at N and 10x N.

    python benchmarks/bench_scopes.py [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import environment, interleaved, print_table, rss_mb, write_json
from _pipeline import Discard, Switch
from _scope_scorers import TurnCount
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    SimpleSpanProcessor,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracescore
from tracescore.gateway._engine import Engine
from tracescore.gateway._journal import Journal
from tracescore.gateway._metrics import GatewayMetrics
from tracescore.online import OnlineScorer, ScoringSpanProcessor
from tracescore.online._listener import LISTENERS

QUESTION = "Where is my parcel?"
ANSWER = "Your parcel left the depot today."
TURNS = 3


_switch = Switch()


def _activate(processor: ScoringSpanProcessor) -> None:
    LISTENERS.only(processor)
    _switch.delegate = processor


@tracescore.tool
def track(parcel: str) -> str:
    return "depot"


_counter = [0]


@tracescore.agent(name="helpdesk", conversation_id=lambda call: call["chat"])
def helpdesk(chat: str, question: str) -> str:
    return f"{ANSWER} ({track(chat)})"


def _call_scorer() -> Any:
    return tracescore.create_content_similarity_scorer()


def _run_scorer() -> Any:
    return tracescore.create_trajectory_accuracy_scorer(expected_trajectory=["track"])


def _processor(scorers: list[Any], rate: float, **conversations: Any) -> ScoringSpanProcessor:
    online = [OnlineScorer(s, rate=rate, sinks=["carrier"] if getattr(s, "scope", "call")
                           == "conversation" else ["span"]) for s in scorers]
    return ScoringSpanProcessor(SimpleSpanProcessor(Discard()), online, isolation="thread",
                                queue_size=100_000, conversations={"quiet_s": 300, **conversations})


def _calls(chats: int) -> Callable[[], None]:
    def call() -> None:
        n = _counter[0] = _counter[0] + 1
        helpdesk(f"chat-{n % chats}", QUESTION)
    return call


# --- 1. CPU per call ---------------------------------------------------------------------------
def cpu_per_call(rounds: int, n: int) -> dict[str, Any]:
    cases = {"a: call scorer": [_call_scorer()],
             "b: + run scorer": [_call_scorer(), _run_scorer()],
             "c: + conversation scorer": [_call_scorer(), _run_scorer(), TurnCount()]}
    out: dict[str, Any] = {}
    for rate in (1.0, 0.0):
        procs = {name: _processor(scorers, rate) for name, scorers in cases.items()}
        timed: dict[str, Callable[[], None]] = {}
        for name, proc in procs.items():
            def one(proc: ScoringSpanProcessor = proc) -> None:
                _activate(proc)
                _calls(1000)()
            timed[name] = one

        def settle() -> None:  # the worker's scoring of the calls is part of their cost
            proc = _switch.delegate
            if isinstance(proc, ScoringSpanProcessor):
                proc.force_flush(120_000)
        figures = {clock: interleaved(timed, rounds=rounds, n=n, clock=clock, settle=settle)
                   for clock in ("process", "wall")}
        base = figures["process"]["a: call scorer"], figures["wall"]["a: call scorer"]
        rows = {name: {"process_us": figures["process"][name] / 1000,
                       "wall_us": figures["wall"][name] / 1000,
                       "process_ratio": figures["process"][name] / base[0],
                       "wall_ratio": figures["wall"][name] / base[1]} for name in cases}
        tracked = procs["c: + conversation scorer"].stats()
        for proc in procs.values():
            proc.shutdown()
        out[f"rate {rate:g}"] = {"cases": rows,
                                 "conversations_pending": tracked.get("conversations.pending")}
        print_table([[name, r["process_us"], r["process_ratio"], r["wall_us"], r["wall_ratio"]]
                     for name, r in rows.items()],
                    ["case", "process CPU us/call", "/ a", "wall us/call", "/ a"],
                    title=f"CPU per agent call, sampling rate {rate:g} ({n} calls x {rounds} "
                          "rounds, alternating)")
    return out


# --- 2. memory of open conversations -------------------------------------------------------------
def open_conversations(count: int, **bounds: Any) -> dict[str, Any]:
    """`count` conversations of TURNS turns each, all waiting; memory growth and counters."""
    proc = _processor([TurnCount()], 1.0, **bounds)
    _activate(proc)
    for n in range(200):  # warm: first calls, caches
        helpdesk(f"warm-{n}", QUESTION)
    proc.force_flush(60_000)
    gc.collect()
    rss0 = rss_mb()
    tracemalloc.start()
    traced0 = tracemalloc.get_traced_memory()[0]
    started = time.perf_counter()
    for turn in range(TURNS):
        for n in range(count):
            helpdesk(f"open-{n}", f"{QUESTION} ({turn})")
    proc.force_flush(120_000)
    time.sleep(1.5)  # the core's timer takes the queued turns in
    gc.collect()
    traced = tracemalloc.get_traced_memory()[0] - traced0
    tracemalloc.stop()
    rss = rss_mb() - rss0
    stats = {k: v for k, v in proc.stats().items() if k.startswith("conversations.")}
    seconds = time.perf_counter() - started
    proc.shutdown(60_000)  # scores what waits (after the measurement)
    open_now = stats.get("conversations.pending", 0)
    return {"conversations": count, "open": open_now, "bounds": bounds,
            "traced_mb": traced / 2**20, "rss_mb": rss,
            "traced_bytes_per_offered": traced / count, "seconds": seconds,
            "counters": stats}


def memory(base: int) -> dict[str, Any]:
    runs: dict[str, Any] = {}
    runs["baseline, default bounds"] = open_conversations(base)
    runs["10x, default bounds"] = open_conversations(10 * base)
    per_conv_bytes = runs["baseline, default bounds"]["counters"].get("conversations.bytes", 0)
    runs["10x, max_conversations = baseline"] = open_conversations(
        10 * base, max_conversations=base)
    runs["10x, max_bytes = baseline's"] = open_conversations(
        10 * base, max_bytes=max(1, int(per_conv_bytes)))
    rows = []
    for name, r in runs.items():
        c = r["counters"]
        early = c.get("conversations.versions.overflow", 0)
        rows.append([name, r["conversations"], r["open"], c.get("conversations.bytes", 0),
                     r["traced_mb"], r["rss_mb"], r["traced_bytes_per_offered"], early])
    print_table(rows, ["load", "conversations", "held", "held bytes", "tracemalloc MB",
                       "RSS MB", "traced B/conv", "scored early"],
                title=f"Open conversations ({TURNS} turns each, all waiting for quiet_s=300)")
    return runs


# --- 3. the gateway's engine ---------------------------------------------------------------------
class _NoOutput:
    def put(self, ids: tuple[int, ...], body: bytes, count: int) -> None:
        pass


def _recorded(conversations: int, calls: int) -> list[bytes]:
    """The OTLP requests of `calls` agent calls over `conversations` conversations, one trace a
    request, recorded from the real decorators."""
    exporter = InMemorySpanExporter()
    recorder = SimpleSpanProcessor(exporter)
    _switch.delegate = recorder
    for n in range(calls):
        helpdesk(f"chat-{n % conversations}", f"{QUESTION} ({n})")
    by_trace: dict[int, list[ReadableSpan]] = {}
    for span in exporter.get_finished_spans():
        by_trace.setdefault(span.context.trace_id, []).append(span)
    return [encode_spans(spans).SerializeToString() for spans in by_trace.values()]


def _engine(scorers: list[Any], journal: Journal | None = None) -> Engine:
    return Engine(scorers=scorers, recognisers=tracescore.build_recognisers(),
                  output=_NoOutput(), metrics=GatewayMetrics(), journal=journal,
                  processor_options={"isolation": "thread", "queue_size": 100_000},
                  run_options={"quiet_s": 0.05}, conversations={"quiet_s": 300})


def gateway_cpu_per_span(rounds: int, n: int) -> dict[str, Any]:
    cases = {"a: call scorer": [_call_scorer()],
             "b: + run scorer": [_call_scorer(), _run_scorer()],
             "c: + conversation scorer": [_call_scorer(), _run_scorer(), TurnCount()]}
    bodies = _recorded(1000, n)
    spans = sum(len(ss.spans) for body in bodies
                for rs in ExportTraceServiceRequest.FromString(body).resource_spans
                for ss in rs.scope_spans)
    engines = {name: _engine(scorers) for name, scorers in cases.items()}
    cursor = {name: 0 for name in cases}
    timed: dict[str, Callable[[], None]] = {}
    for name, engine in engines.items():
        def one(engine: Engine = engine, name: str = name) -> None:
            body = bodies[cursor[name] % len(bodies)]
            cursor[name] += 1
            engine.accept(ExportTraceServiceRequest.FromString(body), body)
        timed[name] = one

    def settle() -> None:  # the runs' quiet period and the scoring are part of the cost
        for engine in engines.values():
            engine.flush(120)
    figures = interleaved(timed, rounds=rounds, n=len(bodies), clock="process", settle=settle)
    per_span = len(bodies) / spans
    base = figures["a: call scorer"]
    rows = {name: {"process_us_per_span": figures[name] * per_span / 1000,
                   "ratio": figures[name] / base} for name in cases}
    for engine in engines.values():
        engine.shutdown(30)
    print_table([[name, r["process_us_per_span"], r["ratio"]] for name, r in rows.items()],
                ["engine scorers", "process CPU us/span", "/ a"],
                title=f"The gateway's engine: CPU per span ({len(bodies)} traces of "
                      f"{spans // len(bodies)} spans x {rounds} rounds, alternating, rate 1)")
    return rows


def gateway_memory(base: int) -> dict[str, Any]:
    """Open conversations held by the gateway's engine, with their turns journaled."""
    out: dict[str, Any] = {}
    for count in (base, 10 * base):
        bodies = _recorded(count, TURNS * count)
        with tempfile.TemporaryDirectory() as folder:
            journal = Journal(Path(folder) / "journal.db", sync="normal")
            engine = _engine([TurnCount()], journal)
            gc.collect()
            rss0 = rss_mb()
            tracemalloc.start()
            for body in bodies:
                engine.accept(ExportTraceServiceRequest.FromString(body), body)
            time.sleep(1.5)  # the core's timer takes the queued turns in
            gc.collect()
            traced = tracemalloc.get_traced_memory()[0]
            tracemalloc.stop()
            rss = rss_mb() - rss0
            journal_bytes = sum(f.stat().st_size for f in Path(folder).iterdir())
            engine.shutdown(30)
            journal.close()
        out[f"{count} conversations"] = {
            "conversations": count, "traced_mb": traced / 2**20, "rss_mb": rss,
            "traced_bytes_per_conversation": traced / count, "journal_mb": journal_bytes / 2**20,
            "journal_bytes_per_conversation": journal_bytes / count}
    print_table([[name, r["traced_mb"], r["rss_mb"], r["traced_bytes_per_conversation"],
                  r["journal_mb"], r["journal_bytes_per_conversation"]] for name, r in out.items()],
                ["load", "tracemalloc MB", "RSS MB", "traced B/conv", "journal MB",
                 "journal B/conv"],
                title=f"The gateway's engine: open conversations ({TURNS} turns each, journaled)")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json")
    args = parser.parse_args()
    provider = TracerProvider()
    provider.add_span_processor(_switch)
    trace.set_tracer_provider(provider)
    rounds, n = (3, 1_000) if args.quick else (5, 2_000)
    base = 400 if args.quick else 1_000
    result = {"environment": environment(), "cpu_per_call": cpu_per_call(rounds, n),
              "memory": memory(base),
              "gateway_cpu_per_span": gateway_cpu_per_span(rounds, n // 2),
              "gateway_memory": gateway_memory(base)}
    write_json(args.json, result)


if __name__ == "__main__":
    main()
