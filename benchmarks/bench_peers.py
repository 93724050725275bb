"""Decorator cost per call against the peer SDKs, each next to hand-written spans, side by side.

For each SDK a subprocess (in that SDK's own venv) times, interleaved in one run, a sync and an
async agent function: the bare call; a hand-written OTel span setting the same attributes as
`@tracescore.agent` (operation, agent name, input/output messages as semconv JSON) under a
SimpleSpanProcessor and under a BatchSpanProcessor (the baselines); and the SDK's own agent
decorator with content capture on, behind a batch processor as production setups use it:
tracescore `configure(batch=True)` (its span cap in front of the SDK's BatchSpanProcessor),
traceloop-sdk `@agent`, openinference `tracer.agent` and logfire `@instrument` (arguments and
return value recorded, its scrubbing on) each with a BatchSpanProcessor, langfuse `@observe`
with the batch processor it always installs. Every exporter drops spans and counts them by
name; before timing, each SDK must have exported its span carrying the question and the
answer (content capture really on).

Both clocks are measured: process CPU time (every thread, each timed window ending with a flush
of every batch processor, so export work done in the background counts) and the calling
thread's wall time. The raw spans are measured in every subprocess, so each SDK's ratio to them
is fair although their OTel versions differ; tracescore's check is against the fastest peer's
ratio (target: at least `PEER_ADVANTAGE` times cheaper).
Peer venvs live in `.bench-venvs/<peer>` (created on first run, reused while the pins match).

    python benchmarks/bench_peers.py [--quick] [--json PATH] [--peers traceloop,langfuse]
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VENVS = ROOT / ".bench-venvs"
sys.path[:0] = [str(HERE), str(ROOT / "tests")]  # _common; the suite's rigs

from _common import environment, interleaved, print_table, write_json

QUESTION = "What is the capital of France, and how many people live there?"
ANSWER = "Paris is the capital of France; about 2.1 million people live in the city proper."
AGENT = "bench"
PEER_ADVANTAGE = 1.5  # tracescore at least this many times cheaper than the fastest peer

# Versions that resolve on PyPI together (traceloop's pins are shared with the conventions venv,
# read in the parent only: the children's venvs have no tracescore).
PEERS: dict[str, dict[str, Any]] = {
    "traceloop": {
        "label": "traceloop-sdk @agent",
        "requirements": None,
    },
    "langfuse": {
        "label": "langfuse @observe",
        "requirements": ["langfuse==5.0.4", "opentelemetry-sdk==1.45.2"],
    },
    "openinference": {
        "label": "openinference tracer.agent",
        "requirements": ["openinference-instrumentation==0.1.72", "opentelemetry-sdk==1.45.2"],
    },
    "logfire": {
        "label": "logfire @instrument",
        "requirements": ["logfire==5.4.0", "opentelemetry-sdk==1.45.2"],
    },
}
OURS = ("tracescore", "tracescore-own-batch")  # configure(batch=True); a user's own Batch setup
LABELS = {"tracescore": "tracescore @agent", "tracescore-own-batch": "tracescore @agent",
          **{k: v["label"] for k, v in PEERS.items()}}


# ----------------------------------------------------------------------------- child side


def _semconv() -> Any:
    """tracescore/_semconv.py loaded by path: peer venvs have no tracescore installed."""
    spec = importlib.util.spec_from_file_location("_bench_semconv", ROOT / "tracescore/_semconv.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _exporter_class() -> type:
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class DiscardExporter(SpanExporter):
        """Drops every span, counting them by name (proof that the SDK really exported)."""

        def __init__(self) -> None:
            self.counts: Counter[str] = Counter()
            self.inspect = True  # record what the first spans carry (off while timing)
            self.content: dict[str, dict[str, bool]] = {}

        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            for span in spans:
                self.counts[span.name] += 1
                if self.inspect:
                    text = " ".join(str(v) for v in (span.attributes or {}).values())
                    self.content[span.name] = {
                        "input_captured": QUESTION in text,
                        "output_captured": ANSWER in text,
                    }
            return SpanExportResult.SUCCESS

    return DiscardExporter


def _answer(question: str) -> str:
    return ANSWER


async def _aanswer(question: str) -> str:
    return ANSWER


def _floor(exporter: Any) -> tuple[dict[str, Callable[[str], Any]], Callable[[], object]]:
    """Hand-written OTel spans with the attributes tracescore sets, under a SimpleSpanProcessor
    and under a BatchSpanProcessor (providers of their own): "raw simple" and "raw batch", sync
    and async; and the flush of the batch one."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.trace import SpanKind

    sc = _semconv()
    static = {sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT, sc.GEN_AI_AGENT_NAME: AGENT}
    name = f"{sc.OP_INVOKE_AGENT} {AGENT}"

    def messages(role: str, text: str, finish: bool) -> str:
        message: dict[str, Any] = {"role": role, "parts": [{"type": "text", "content": text}]}
        if finish:
            message["finish_reason"] = "stop"
        return json.dumps([message], ensure_ascii=False, separators=(",", ":"))

    def functions(tracer: Any) -> tuple[Callable[[str], str], Callable[[str], Any]]:
        def raw(question: str) -> str:
            attributes = {**static, sc.GEN_AI_INPUT_MESSAGES: messages("user", question, False)}
            with tracer.start_as_current_span(name, kind=SpanKind.INTERNAL,
                                              attributes=attributes) as span:
                result = _answer(question)
                span.set_attribute(sc.GEN_AI_OUTPUT_MESSAGES, messages("assistant", result, True))
                return result

        async def araw(question: str) -> str:
            attributes = {**static, sc.GEN_AI_INPUT_MESSAGES: messages("user", question, False)}
            with tracer.start_as_current_span(name, kind=SpanKind.INTERNAL,
                                              attributes=attributes) as span:
                result = await _aanswer(question)
                span.set_attribute(sc.GEN_AI_OUTPUT_MESSAGES, messages("assistant", result, True))
                return result

        return raw, araw

    out: dict[str, Callable[[str], Any]] = {}
    batch = BatchSpanProcessor(exporter)
    for label, processor in (("simple", SimpleSpanProcessor(exporter)), ("batch", batch)):
        provider = TracerProvider()
        provider.add_span_processor(processor)
        out[f"sync raw {label}"], out[f"async raw {label}"] = functions(
            provider.get_tracer(f"bench.raw.{label}"))
    return out, batch.force_flush


# Each setup returns (sync_fn, async_fn, expected span name, flush, version string, processor).
Setup = tuple[Callable[[str], str], Callable[[str], Any], str, Callable[[], object], str, str]


def _batch(exporter: Any) -> Any:
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    return BatchSpanProcessor(exporter)


def _setup_tracescore(exporter: Any) -> Setup:
    import tracescore
    from tracescore import _semconv as sc

    handle = tracescore.configure(service_name="bench", exporter=exporter, batch=True)
    tracescore.set_content_capture(True, redact=True)
    sync_fn = tracescore.agent(name=AGENT)(_answer)
    async_fn = tracescore.agent(name=AGENT)(_aanswer)
    version = getattr(tracescore, "__version__", "dev")
    return (sync_fn, async_fn, f"{sc.OP_INVOKE_AGENT} {AGENT}", handle.flush, version,
            "configure(batch=True): span cap + BatchSpanProcessor")


def _setup_tracescore_own_batch(exporter: Any) -> Setup:
    """`@tracescore.agent` on a provider the user set up with the SDK's BatchSpanProcessor (no
    configure(), so no span cap): the same processor the peers get."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    import tracescore
    from tracescore import _semconv as sc

    processor = _batch(exporter)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    trace.set_tracer_provider(provider)
    tracescore.set_content_capture(True, redact=True)
    sync_fn = tracescore.agent(name=AGENT)(_answer)
    async_fn = tracescore.agent(name=AGENT)(_aanswer)
    version = getattr(tracescore, "__version__", "dev")
    return (sync_fn, async_fn, f"{sc.OP_INVOKE_AGENT} {AGENT}", processor.force_flush, version,
            "BatchSpanProcessor (own setup, no configure())")


def _setup_traceloop(exporter: Any) -> Setup:
    from importlib.metadata import version

    from traceloop.sdk import Traceloop
    from traceloop.sdk.decorators import agent

    processor = _batch(exporter)
    Traceloop.init(
        app_name="bench",
        processor=processor,
        telemetry_enabled=False,
        instruments=set(),
        api_endpoint="http://127.0.0.1:9",
    )
    sync_fn = agent(name=AGENT)(_answer)
    async_fn = agent(name=AGENT)(_aanswer)
    return (sync_fn, async_fn, f"{AGENT}.agent", processor.force_flush, version("traceloop-sdk"),
            "BatchSpanProcessor")


def _setup_langfuse(exporter: Any) -> Setup:
    from importlib.metadata import version

    from langfuse import Langfuse, observe
    from opentelemetry.sdk.trace import TracerProvider

    client = Langfuse(
        public_key="pk-lf-bench",
        secret_key="sk-lf-bench",
        base_url="http://127.0.0.1:9",
        tracer_provider=TracerProvider(),
        span_exporter=exporter,
    )
    sync_fn = observe(name=AGENT, as_type="agent")(_answer)
    async_fn = observe(name=AGENT, as_type="agent")(_aanswer)
    return (sync_fn, async_fn, AGENT, client.flush, version("langfuse"),
            "its own batch processor")


def _setup_openinference(exporter: Any) -> Setup:
    from importlib.metadata import version

    from openinference.instrumentation import OITracer, TraceConfig
    from opentelemetry.sdk.trace import TracerProvider

    processor = _batch(exporter)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = OITracer(provider.get_tracer("bench"), config=TraceConfig())
    sync_fn = tracer.agent(name=AGENT)(_answer)
    async_fn = tracer.agent(name=AGENT)(_aanswer)
    return (sync_fn, async_fn, AGENT, processor.force_flush,
            version("openinference-instrumentation"), "BatchSpanProcessor")


def _setup_logfire(exporter: Any) -> Setup:
    from importlib.metadata import version

    import logfire

    processor = _batch(exporter)
    logfire.configure(send_to_logfire=False, console=False, service_name="bench",
                      additional_span_processors=[processor])
    instrument = logfire.instrument(AGENT, extract_args=True, record_return=True)
    return (instrument(_answer), instrument(_aanswer), AGENT, processor.force_flush,
            version("logfire"), "BatchSpanProcessor (logfire's scrubbing on)")


SETUPS: dict[str, Callable[[Any], Setup]] = {
    "tracescore": _setup_tracescore,
    "tracescore-own-batch": _setup_tracescore_own_batch,
    "traceloop": _setup_traceloop,
    "langfuse": _setup_langfuse,
    "openinference": _setup_openinference,
    "logfire": _setup_logfire,
}


def _child(sdk: str, rounds: int, calls: int, out: Path) -> None:
    os.environ.update(
        TRACELOOP_TELEMETRY="false",
        TRACELOOP_METRICS_ENABLED="false",
        TRACELOOP_LOGGING_ENABLED="false",
        TRACELOOP_TRACE_CONTENT="true",
        LANGFUSE_OBSERVE_DECORATOR_IO_CAPTURE_ENABLED="true",
        LANGFUSE_MEDIA_UPLOAD_ENABLED="false",
        OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="true",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
    )
    import asyncio

    from opentelemetry.sdk import version as otel_version

    floor_exporter = _exporter_class()()
    exporter = _exporter_class()()
    raw, floor_flush = _floor(floor_exporter)
    sync_fn, async_fn, expected, flush, sdk_version, processor = SETUPS[sdk](exporter)

    # Prove every variant exports before timing anything.
    for key, fn in raw.items():
        assert (asyncio.run(fn(QUESTION)) if key.startswith("async") else fn(QUESTION)) == ANSWER
    assert sync_fn(QUESTION) == ANSWER
    assert asyncio.run(async_fn(QUESTION)) == ANSWER
    flush()
    floor_flush()
    raw_count = sum(floor_exporter.counts.values())
    verified = {"raw": raw_count, sdk: exporter.counts[expected]}
    content = exporter.content.get(expected, {})
    exporter.inspect = floor_exporter.inspect = False
    if exporter.counts[expected] != 2 or raw_count != len(raw):
        raise SystemExit(
            f"{sdk}: expected 2 spans named {expected!r} (and {len(raw)} raw); "
            f"got {dict(exporter.counts)} (raw {dict(floor_exporter.counts)})"
        )
    if not all(content.values()) or not content:
        raise SystemExit(f"{sdk}: content capture is not on for {expected!r}: {content}")

    def settle() -> None:
        """Flush every batch processor: background work owed by the timed calls is counted."""
        floor_flush()
        flush()

    cases: dict[str, Callable[[], Any]] = {"sync bare": lambda: _answer(QUESTION)}

    async def abare() -> Any:
        return await _aanswer(QUESTION)

    cases["async bare"] = abare
    for key, fn in [*raw.items(), ("sync sdk", sync_fn), ("async sdk", async_fn)]:
        cases[key] = _call(fn, key.startswith("async"))
    before = exporter.counts[expected]
    samples: dict[str, dict[str, list[float]]] = {"process": {}, "wall": {}}
    medians = {clock: interleaved(cases, rounds=rounds, n=calls, clock=clock, settle=settle,
                                  samples=samples[clock])
               for clock in ("process", "wall")}
    exported = exporter.counts[expected] - before
    result = {
        "sdk": sdk,
        "version": sdk_version,
        "processor": processor,
        "otel_sdk_version": otel_version.__version__,
        "python": sys.version.split()[0],
        "verified_spans": verified,
        "content_captured": content,
        "expected_span_name": expected,
        "spans_exported_while_timing": exported,
        "medians_ns": medians,
        "rounds_ns": samples,
    }
    out.write_text(json.dumps(result), "utf-8")


def _call(fn: Callable[[str], Any], asynchronous: bool) -> Callable[[], Any]:
    """A no-argument case calling `fn(QUESTION)` (a coroutine function when `fn` is async)."""
    if asynchronous:
        async def arun() -> Any:
            return await fn(QUESTION)

        return arun
    return lambda: fn(QUESTION)


# ----------------------------------------------------------------------------- parent side


def _venv_python(peer: str) -> Path:
    return VENVS / peer / "bin" / "python"


def ensure_venv(peer: str, log: Callable[[str], None] = print) -> Path:
    """Create/refresh `.bench-venvs/<peer>` with the pinned requirements; return its python."""
    reqs = PEERS[peer]["requirements"]
    if reqs is None:
        from rigs.conventions import TRACELOOP_REQUIREMENTS

        reqs = list(TRACELOOP_REQUIREMENTS)
    stamp_value = hashlib.sha256("\n".join(reqs).encode()).hexdigest()
    directory = VENVS / peer
    stamp = directory / ".bench-stamp"
    python = _venv_python(peer)
    if python.exists() and stamp.exists() and stamp.read_text().strip() == stamp_value:
        return python
    log(f"[peers] installing {peer} into {directory} ({' '.join(reqs)})")
    if not python.exists():
        venv.EnvBuilder(with_pip=True, clear=True).create(directory)
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *reqs],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=900,
    )
    stamp.write_text(stamp_value + "\n")
    return python


def _run_child(sdk: str, python: Path, rounds: int, calls: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LANGFUSE_", "TRACELOOP_"))}
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        cmd = [str(python), str(Path(__file__).resolve()), "--child", sdk]
        cmd += ["--rounds", str(rounds), "--calls", str(calls)]
        cmd += ["--out", str(out)]
        proc = subprocess.run(
            cmd, check=False, env=env, capture_output=True, text=True, timeout=900
        )
        if proc.returncode != 0 or not out.exists():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
            raise RuntimeError(f"{sdk} child failed (exit {proc.returncode}): " + " | ".join(tail))
        return json.loads(out.read_text("utf-8"))


def _summarise(child: dict[str, Any]) -> dict[str, Any]:
    """Per flavour and clock ("cpu": process CPU, every thread; "wall"): ns per call of the bare
    function, both raw spans and the SDK's decorator (medians over rounds), and the decorator
    over each raw span (median of the per-round ratios: one round's cases ran moments apart)."""
    out: dict[str, Any] = {k: child[k] for k in child if k not in ("medians_ns", "rounds_ns")}
    for flavour in ("sync", "async"):
        figures: dict[str, Any] = {}
        for clock, name in (("cpu", "process"), ("wall", "wall")):
            m, r = child["medians_ns"][name], child["rounds_ns"][name]
            sdk = r[f"{flavour} sdk"]
            figures[clock] = {
                "bare_ns": m[f"{flavour} bare"],
                "raw_simple_ns": m[f"{flavour} raw simple"],
                "raw_batch_ns": m[f"{flavour} raw batch"],
                "sdk_ns": m[f"{flavour} sdk"],
                "ratio_to_raw_batch": statistics.median(
                    a / b for a, b in zip(sdk, r[f"{flavour} raw batch"])),
                "ratio_to_raw_simple": statistics.median(
                    a / b for a, b in zip(sdk, r[f"{flavour} raw simple"])),
            }
        out[flavour] = figures
    return out


def _checks(sdks: dict[str, Any]) -> dict[str, Any]:
    """tracescore (with configure(); key `{flavour}`, and on the user's own BatchSpanProcessor;
    key `{flavour} own batch`) against the fastest peer, in process CPU relative to the raw
    Batch span measured in each SDK's own process (absolute figures differ between processes)."""
    checks: dict[str, Any] = {}
    for flavour, ours in [(f, o) for f in ("sync", "async") for o in OURS]:
        res = sdks.get(ours)
        peers = {sdk: r[flavour]["cpu"]["ratio_to_raw_batch"]
                 for sdk, r in sdks.items() if sdk not in OURS}
        if res is None or not peers:
            continue
        fastest = min(peers, key=peers.__getitem__)
        ratio = res[flavour]["cpu"]["ratio_to_raw_batch"]
        key = flavour if ours == "tracescore" else f"{flavour} own batch"
        checks[key] = {
            "tracescore_setup": res["processor"],
            "ratio_to_raw_batch": ratio,
            "fastest_peer": fastest,
            "fastest_peer_ratio_to_raw_batch": peers[fastest],
            "fastest_peer_over_tracescore": peers[fastest] / ratio,
            "within_target": peers[fastest] / ratio >= PEER_ADVANTAGE,
        }
    return checks


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds/calls (smoke run)")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--calls", type=int, default=None, help="calls per round and case")
    parser.add_argument("--json", dest="json_path", default=None, help="write figures here")
    parser.add_argument(
        "--peers", default=",".join(PEERS), help="comma-separated peers (default: all)"
    )
    parser.add_argument("--no-install", action="store_true", help="skip peers without a venv")
    parser.add_argument("--child", choices=sorted(SETUPS), help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    rounds = args.rounds or (7 if args.quick else 15)
    calls = args.calls or (1_000 if args.quick else 3_000)

    if args.child:
        _child(args.child, rounds, calls, args.out)
        return {}

    peers = [p.strip() for p in args.peers.split(",") if p.strip()]
    unknown = sorted(set(peers) - set(PEERS))
    if unknown:
        parser.error(f"unknown peer(s): {', '.join(unknown)} (known: {', '.join(PEERS)})")

    started = time.monotonic()
    results: dict[str, Any] = {
        "environment": environment(),
        "rounds": rounds,
        "calls": calls,
        "clock": "process CPU (all threads, batch processors flushed in each timed window) "
                 "and calling-thread wall",
        "target_advantage": PEER_ADVANTAGE,
        "sdks": {},
        "errors": {},
    }
    plan: list[tuple[str, Path]] = [(ours, Path(sys.executable)) for ours in OURS]
    for peer in peers:
        try:
            if args.no_install and not _venv_python(peer).exists():
                raise RuntimeError("no venv and --no-install given")
            plan.append((peer, ensure_venv(peer)))
        except (subprocess.SubprocessError, OSError, RuntimeError) as exc:
            detail = getattr(exc, "stderr", None) or b""
            if isinstance(detail, bytes):
                detail = detail.decode(errors="replace")
            tail = " ".join(str(detail).strip().splitlines()[-2:])
            results["errors"][peer] = f"venv: {exc} {tail}".strip()
            print(f"[peers] {peer}: skipped ({results['errors'][peer]})", file=sys.stderr)
    for sdk, python in plan:
        print(f"[peers] timing {sdk} ...", file=sys.stderr, flush=True)
        try:
            results["sdks"][sdk] = _summarise(_run_child(sdk, python, rounds, calls))
        except (RuntimeError, subprocess.SubprocessError, OSError, ValueError) as exc:
            results["errors"][sdk] = str(exc)
            print(f"[peers] {sdk}: failed: {exc}", file=sys.stderr)

    rows = []
    for flavour in ("sync", "async"):
        for sdk, res in results["sdks"].items():
            cpu, wall = res[flavour]["cpu"], res[flavour]["wall"]
            rows.append([f"{flavour} {LABELS[sdk]} {res['version']}", res["processor"],
                         cpu["raw_simple_ns"] / 1000, cpu["raw_batch_ns"] / 1000,
                         cpu["sdk_ns"] / 1000, cpu["ratio_to_raw_batch"],
                         cpu["ratio_to_raw_simple"], wall["sdk_ns"] / 1000,
                         wall["ratio_to_raw_batch"]])
    print_table(
        rows,
        ["sdk (content capture on)", "span processor", "raw Simple CPU us", "raw Batch CPU us",
         "sdk CPU us", "CPU / raw Batch", "CPU / raw Simple", "sdk wall us", "wall / raw Batch"],
        title="Agent decorator cost per call, process CPU (every thread) and wall, each SDK next "
              f"to hand-written same-attribute spans in its own process (median of {rounds} "
              f"interleaved rounds x {calls} calls)",
    )
    results["checks"] = _checks(results["sdks"])
    for flavour, check in results["checks"].items():
        advantage = check["fastest_peer_over_tracescore"]
        print(f"{flavour}: fastest peer ({check['fastest_peer']}) / tracescore "
              f"({check['tracescore_setup']}), process CPU "
              f"relative to the raw Batch span = {check['fastest_peer_ratio_to_raw_batch']:.2f} / "
              f"{check['ratio_to_raw_batch']:.2f} = {advantage:.2f}x (target >= {PEER_ADVANTAGE}) "
              f"{'OK' if check['within_target'] else 'BELOW TARGET'}")
    for sdk, err in results["errors"].items():
        print(f"{sdk}: not measured: {err}")
    results["elapsed_s"] = time.monotonic() - started
    write_json(args.json_path, results)
    return results


if __name__ == "__main__":
    main()
