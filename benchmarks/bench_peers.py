"""Decorator overhead per call against raw OpenTelemetry and the peer SDKs, side by side.

For each SDK a subprocess (in that SDK's own venv) times, interleaved in one run, a sync and an
async agent function three ways: the bare call, a hand-written OTel span that sets the same
attributes (the floor: operation, agent name, input/output messages as semconv JSON), and the
SDK's own agent decorator with content capture on. Every traced variant exports through a
SimpleSpanProcessor (Langfuse: its own batch processor, which it always installs) into one
in-process exporter that drops spans and counts them by name; before timing, each SDK must
have exported its span with the expected name, carrying the question and the answer (content
capture really on). Because the floor is measured in every
subprocess, each SDK's ratio to raw OTel is fair even though their OTel versions differ.
Time is the calling thread's CPU time by default (`--clock wall` for elapsed time): on a busy
host it leaves out time spent waiting for a core (it also leaves out background export threads,
which only Langfuse uses here).

SDKs: tracescore (`@tracescore.agent`, via `tracescore.configure(exporter=..., batch=False)`),
traceloop-sdk (`@agent`), langfuse (`@observe`), openinference (`OITracer.agent`).
Peer venvs live in `.bench-venvs/<peer>` (created on first run, reused while the pins match).

    python benchmarks/bench_peers.py [--quick] [--json PATH] [--peers traceloop,langfuse]
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
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
from rigs.conventions import TRACELOOP_REQUIREMENTS

QUESTION = "What is the capital of France, and how many people live there?"
ANSWER = "Paris is the capital of France; about 2.1 million people live in the city proper."
AGENT = "bench"
TARGET_RATIO = 1.2

# Versions that resolve on PyPI together (traceloop's pins are shared with the conventions venv).
PEERS: dict[str, dict[str, Any]] = {
    "traceloop": {
        "label": "traceloop-sdk @agent",
        "requirements": list(TRACELOOP_REQUIREMENTS),
    },
    "langfuse": {
        "label": "langfuse @observe",
        "requirements": ["langfuse==5.0.4", "opentelemetry-sdk==1.45.2"],
    },
    "openinference": {
        "label": "openinference tracer.agent",
        "requirements": ["openinference-instrumentation==0.1.72", "opentelemetry-sdk==1.45.2"],
    },
}
LABELS = {"tracescore": "tracescore @agent", **{k: v["label"] for k, v in PEERS.items()}}


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


def _floor(exporter: Any) -> tuple[Callable[[str], str], Callable[[str], Any]]:
    """Hand-written OTel spans with the attributes tracescore sets, on a provider of their own."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.trace import SpanKind

    sc = _semconv()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("bench.raw")
    static = {sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT, sc.GEN_AI_AGENT_NAME: AGENT}
    name = f"{sc.OP_INVOKE_AGENT} {AGENT}"

    def messages(role: str, text: str, finish: bool) -> str:
        message: dict[str, Any] = {"role": role, "parts": [{"type": "text", "content": text}]}
        if finish:
            message["finish_reason"] = "stop"
        return json.dumps([message], ensure_ascii=False, separators=(",", ":"))

    def raw(question: str) -> str:
        attributes = {**static, sc.GEN_AI_INPUT_MESSAGES: messages("user", question, False)}
        with tracer.start_as_current_span(name, kind=SpanKind.INTERNAL, attributes=attributes) as s:
            result = _answer(question)
            s.set_attribute(sc.GEN_AI_OUTPUT_MESSAGES, messages("assistant", result, True))
            return result

    async def araw(question: str) -> str:
        attributes = {**static, sc.GEN_AI_INPUT_MESSAGES: messages("user", question, False)}
        with tracer.start_as_current_span(name, kind=SpanKind.INTERNAL, attributes=attributes) as s:
            result = await _aanswer(question)
            s.set_attribute(sc.GEN_AI_OUTPUT_MESSAGES, messages("assistant", result, True))
            return result

    return raw, araw


# Each setup returns (sync_fn, async_fn, expected span name, flush, version string).
Setup = tuple[Callable[[str], str], Callable[[str], Any], str, Callable[[], object], str]


def _setup_tracescore(exporter: Any) -> Setup:
    import tracescore
    from tracescore import _semconv as sc

    handle = tracescore.configure(service_name="bench", exporter=exporter, batch=False)
    tracescore.set_content_capture(True, redact=True)
    sync_fn = tracescore.agent(name=AGENT)(_answer)
    async_fn = tracescore.agent(name=AGENT)(_aanswer)
    version = getattr(tracescore, "__version__", "dev")
    return sync_fn, async_fn, f"{sc.OP_INVOKE_AGENT} {AGENT}", handle.flush, version


def _setup_traceloop(exporter: Any) -> Setup:
    from importlib.metadata import version

    from traceloop.sdk import Traceloop
    from traceloop.sdk.decorators import agent

    Traceloop.init(
        app_name="bench",
        exporter=exporter,
        disable_batch=True,
        telemetry_enabled=False,
        instruments=set(),
        api_endpoint="http://127.0.0.1:9",
    )
    sync_fn = agent(name=AGENT)(_answer)
    async_fn = agent(name=AGENT)(_aanswer)
    return sync_fn, async_fn, f"{AGENT}.agent", lambda: None, version("traceloop-sdk")


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
    return sync_fn, async_fn, AGENT, client.flush, version("langfuse")


def _setup_openinference(exporter: Any) -> Setup:
    from importlib.metadata import version

    from openinference.instrumentation import OITracer, TraceConfig
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = OITracer(provider.get_tracer("bench"), config=TraceConfig())
    sync_fn = tracer.agent(name=AGENT)(_answer)
    async_fn = tracer.agent(name=AGENT)(_aanswer)
    return sync_fn, async_fn, AGENT, lambda: None, version("openinference-instrumentation")


SETUPS: dict[str, Callable[[Any], Setup]] = {
    "tracescore": _setup_tracescore,
    "traceloop": _setup_traceloop,
    "langfuse": _setup_langfuse,
    "openinference": _setup_openinference,
}


def _child(sdk: str, rounds: int, calls: int, clock: str, out: Path) -> None:
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
    from opentelemetry.sdk import version as otel_version

    floor_exporter = _exporter_class()()
    exporter = _exporter_class()()
    raw, araw = _floor(floor_exporter)
    sync_fn, async_fn, expected, flush, sdk_version = SETUPS[sdk](exporter)

    # Prove every variant exports before timing anything.
    import asyncio

    raw(QUESTION)
    asyncio.run(araw(QUESTION))
    assert sync_fn(QUESTION) == ANSWER
    assert asyncio.run(async_fn(QUESTION)) == ANSWER
    flush()
    raw_count = sum(floor_exporter.counts.values())
    verified = {"raw": raw_count, sdk: exporter.counts[expected]}
    content = exporter.content.get(expected, {})
    exporter.inspect = floor_exporter.inspect = False
    if exporter.counts[expected] != 2 or raw_count != 2:
        raise SystemExit(
            f"{sdk}: expected 2 spans named {expected!r} (and 2 raw); "
            f"got {dict(exporter.counts)} (raw {dict(floor_exporter.counts)})"
        )
    if not all(content.values()) or not content:
        raise SystemExit(f"{sdk}: content capture is not on for {expected!r}: {content}")

    async def _a(fn: Callable[[str], Any]) -> Any:
        return await fn(QUESTION)

    cases: dict[str, Callable[[], Any]] = {
        "sync bare": lambda: _answer(QUESTION),
        "sync raw": lambda: raw(QUESTION),
        "sync sdk": lambda: sync_fn(QUESTION),
        "async bare": lambda: _a(_aanswer),
        "async raw": lambda: _a(araw),
        "async sdk": lambda: _a(async_fn),
    }
    # interleaved() awaits coroutine functions; wrap the lambdas that return coroutines.
    for key in [k for k in cases if k.startswith("async")]:
        make = cases[key]

        async def run(make: Callable[[], Any] = make) -> Any:
            return await make()

        cases[key] = run
    before = exporter.counts[expected]
    medians = interleaved(cases, rounds=rounds, n=calls, clock=clock)
    flush()
    exported = exporter.counts[expected] - before
    result = {
        "sdk": sdk,
        "version": sdk_version,
        "otel_sdk_version": otel_version.__version__,
        "python": sys.version.split()[0],
        "verified_spans": verified,
        "content_captured": content,
        "expected_span_name": expected,
        "spans_exported_while_timing": exported,
        "medians_ns": medians,
    }
    out.write_text(json.dumps(result), "utf-8")


# ----------------------------------------------------------------------------- parent side


def _venv_python(peer: str) -> Path:
    return VENVS / peer / "bin" / "python"


def ensure_venv(peer: str, log: Callable[[str], None] = print) -> Path:
    """Create/refresh `.bench-venvs/<peer>` with the pinned requirements; return its python."""
    reqs = PEERS[peer]["requirements"]
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


def _run_child(sdk: str, python: Path, rounds: int, calls: int, clock: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LANGFUSE_", "TRACELOOP_"))}
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        cmd = [str(python), str(Path(__file__).resolve()), "--child", sdk]
        cmd += ["--rounds", str(rounds), "--calls", str(calls), "--clock", clock]
        cmd += ["--out", str(out)]
        proc = subprocess.run(
            cmd, check=False, env=env, capture_output=True, text=True, timeout=900
        )
        if proc.returncode != 0 or not out.exists():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
            raise RuntimeError(f"{sdk} child failed (exit {proc.returncode}): " + " | ".join(tail))
        return json.loads(out.read_text("utf-8"))


def _summarise(child: dict[str, Any]) -> dict[str, Any]:
    m = child["medians_ns"]
    out: dict[str, Any] = {k: child[k] for k in child if k != "medians_ns"}
    for flavour in ("sync", "async"):
        bare, raw, sdk = m[f"{flavour} bare"], m[f"{flavour} raw"], m[f"{flavour} sdk"]
        out[flavour] = {
            "bare_ns": bare,
            "raw_ns": raw,
            "sdk_ns": sdk,
            "sdk_overhead_ns": sdk - bare,
            "raw_overhead_ns": raw - bare,
            "ratio_to_raw": sdk / raw,
            "overhead_ratio_to_raw": (sdk - bare) / (raw - bare) if raw > bare else None,
        }
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds/calls (smoke run)")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--calls", type=int, default=None, help="calls per round and case")
    parser.add_argument("--json", dest="json_path", default=None, help="write figures here")
    parser.add_argument(
        "--peers", default=",".join(PEERS), help="comma-separated peers (default: all)"
    )
    parser.add_argument(
        "--clock",
        choices=("cpu", "wall"),
        default="cpu",
        help="cpu: the calling thread's CPU time (default; steady on a busy host), wall: elapsed",
    )
    parser.add_argument("--no-install", action="store_true", help="skip peers without a venv")
    parser.add_argument("--child", choices=sorted(SETUPS), help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    rounds = args.rounds or (9 if args.quick else 21)
    calls = args.calls or (1_000 if args.quick else 3_000)

    if args.child:
        _child(args.child, rounds, calls, args.clock, args.out)
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
        "clock": args.clock,
        "target_ratio": TARGET_RATIO,
        "sdks": {},
        "errors": {},
    }
    plan: list[tuple[str, Path]] = [("tracescore", Path(sys.executable))]
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
            results["sdks"][sdk] = _summarise(_run_child(sdk, python, rounds, calls, args.clock))
        except (RuntimeError, subprocess.SubprocessError, OSError, ValueError) as exc:
            results["errors"][sdk] = str(exc)
            print(f"[peers] {sdk}: failed: {exc}", file=sys.stderr)

    rows = []
    for flavour in ("sync", "async"):
        for sdk, res in results["sdks"].items():
            r = res[flavour]
            rows.append(
                [
                    f"{flavour} {LABELS[sdk]} {res['version']}",
                    r["bare_ns"],
                    r["raw_ns"],
                    r["sdk_ns"],
                    r["ratio_to_raw"],
                ]
            )
    print_table(
        rows,
        ["sdk (content capture on)", "bare ns", "raw OTel ns", "sdk ns", "sdk/raw"],
        title=f"Agent decorator cost per call ({args.clock} time), each SDK vs raw OTel in its "
        f"own process (median of {rounds} interleaved rounds x {calls} calls)",
    )
    ours = results["sdks"].get("tracescore")
    checks: dict[str, Any] = {}
    if ours:
        for flavour in ("sync", "async"):
            ratio = ours[flavour]["ratio_to_raw"]
            slower = [
                sdk
                for sdk, res in results["sdks"].items()
                if sdk != "tracescore" and res[flavour]["ratio_to_raw"] <= ratio
            ]
            checks[flavour] = {
                "ratio_to_raw": ratio,
                "within_target": ratio <= TARGET_RATIO,
                "faster_than_all_peers": not slower,
                "peers_not_beaten": slower,
            }
            print(
                f"{flavour}: tracescore/raw = {ratio:.2f} (target <= {TARGET_RATIO}) "
                f"{'OK' if ratio <= TARGET_RATIO else 'ABOVE TARGET'}; "
                + ("faster than every peer" if not slower else f"NOT faster than {slower}")
            )
    results["checks"] = checks
    for sdk, err in results["errors"].items():
        print(f"{sdk}: not measured: {err}")
    results["elapsed_s"] = time.monotonic() - started
    write_json(args.json_path, results)
    return results


if __name__ == "__main__":
    main()
