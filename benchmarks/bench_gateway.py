"""The scoring gateway (`tracescore serve`), side by side in one run:

  * pass-through: spans/s of requests with nothing to hold (512 plain spans each), gateway
    pinned to one core, against a plain Python OTLP pass-through (receive -> forward, no
    journal, no recognition) on the same core and, when the project's collector binary is
    built (`tracescore.testing._collector`), a real OpenTelemetry Collector doing the same;
  * added latency: p50/p99 from send to arrival at the next hop of small requests (10 spans) at
    a steady rate, direct vs through each pass-through; "added" is the difference in p99;
  * scoring throughput: scores/s of relevancy (3 judge calls) with a stub judge of fixed
    latency, against the ideal concurrency / (3 x latency), for 1 and 2 replicas (traffic split
    by trace id as the collector's loadbalancing exporter does), and the CPU per relevancy
    score of the gateway and of its scoring process; with `--profile`, py-spy samples the
    scoring process and a table says where its CPU goes (`_judge_profile`);
  * judge client (part `client`): CPU per judge call of `LiteLLMJudge.judge` and of a
    relevancy score against `litellm.acompletion` alone, in one process (`_judge_client`);
  * memory: RSS of the gateway under ~10x overload (a next hop that takes a tenth of what is
    offered, agent spans whose judge is slow) over 60 s (15 s with --quick);
  * HTTP pass-through (part `http`): OTLP/HTTP protobuf in, gRPC out, keep-alive senders, the
    gateway pinned to one core: spans/s and the gateway process's CPU per forwarded span, for
    this checkout and, with `--baseline DIR` (another checkout, e.g. `git worktree add
    /tmp/bench-main main`), that one's server side by side, in alternating rounds.

    python benchmarks/bench_gateway.py [--quick] [--json PATH] [--parts http --baseline DIR]
        [--parts client,scoring --profile]
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing as mp
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent import futures
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import environment, percentiles, print_table, rss_mb, write_json

_EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
_SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
QUESTION = "What is the capital of France?"
ANSWER = "Paris is the capital of France."


# --- requests ----------------------------------------------------------------------------------
def plain_request(spans: int, rng: random.Random, *, trace_id: bytes | None = None) -> bytes:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest()
    rs = request.resource_spans.add()
    rs.resource.attributes.add(key="service.name").value.string_value = "shop"
    ss = rs.scope_spans.add()
    ss.scope.name = "opentelemetry.instrumentation.flask"
    for index in range(spans):
        span = ss.spans.add(name="GET /orders/{id}", kind=2,
                            start_time_unix_nano=1_700_000_000_000_000_000,
                            end_time_unix_nano=1_700_000_000_002_000_000)
        span.trace_id = trace_id or rng.randbytes(16)
        span.span_id = rng.randbytes(8)
        for key, value in (("http.request.method", "GET"), ("http.route", "/orders/{id}"),
                           ("url.path", f"/orders/{index}"), ("server.address", "shop.example"),
                           ("user_agent.original", "curl/8.5.0")):
            span.attributes.add(key=key).value.string_value = value
        span.attributes.add(key="http.response.status_code").value.int_value = 200
    return request.SerializeToString()


def agent_request(rng: random.Random, trace_id: bytes | None = None) -> bytes:
    import json

    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest()
    ss = request.resource_spans.add().scope_spans.add()
    span = ss.spans.add(name="invoke_agent geo", start_time_unix_nano=1, end_time_unix_nano=2)
    span.trace_id = trace_id or rng.randbytes(16)
    span.span_id = rng.randbytes(8)
    attributes = {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "geo",
        "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [
            {"type": "text", "content": QUESTION}]}]),
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
            {"type": "text", "content": ANSWER}]}]),
    }
    for key, value in attributes.items():
        span.attributes.add(key=key).value.string_value = value
    return request.SerializeToString()


# --- the next hop: a counting OTLP/gRPC sink in its own process --------------------------------
def _sink_main(port: Any, spans: Any, conn: Any, delay_s: float) -> None:
    import grpc
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    arrivals: dict[bytes, int] = {}
    lock = threading.Lock()

    def export(raw: bytes, context: Any) -> bytes:
        now = time.time_ns()
        if delay_s:
            time.sleep(delay_s)
        request = ExportTraceServiceRequest.FromString(raw)
        count = 0
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                # the judge's own spans (its calls, traced) are no spans the gateway was sent
                count += sum(1 for span in ss.spans if not any(
                    kv.key == "tracescore.span.judge" for kv in span.attributes))
                if ss.spans and ss.spans[0].trace_id[:4] == b"LAT!":
                    with lock:
                        for span in ss.spans:
                            arrivals.setdefault(span.trace_id, now)
        with spans.get_lock():
            spans.value += count
        return b""

    handler = grpc.method_handlers_generic_handler(_SERVICE, {
        "Export": grpc.unary_unary_rpc_method_handler(export)})
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), handlers=(handler,),
                         options=[("grpc.max_receive_message_length", 256 << 20)])
    port.value = server.add_insecure_port("127.0.0.1:0")
    server.start()
    while True:
        message = conn.recv()
        if message == "arrivals":
            with lock:
                conn.send(dict(arrivals))
                arrivals.clear()
        else:
            break
    server.stop(grace=None)


class Sink:
    def __init__(self, delay_s: float = 0.0) -> None:
        ctx = mp.get_context("spawn")
        self._port = ctx.Value("i", 0)
        self.spans = ctx.Value("q", 0)
        self._conn, child = ctx.Pipe()
        self._process = ctx.Process(target=_sink_main,
                                    args=(self._port, self.spans, child, delay_s), daemon=True)
        self._process.start()
        while not self._port.value:
            time.sleep(0.01)
        self.endpoint = f"http://127.0.0.1:{self._port.value}"

    @property
    def count(self) -> int:
        return int(self.spans.value)

    @property
    def pid(self) -> int:
        return int(self._process.pid or 0)

    def arrivals(self) -> dict[bytes, int]:
        self._conn.send("arrivals")
        return self._conn.recv()

    def close(self) -> None:
        self._conn.send("stop")
        self._process.join(5)
        if self._process.is_alive():
            self._process.kill()


# --- the pass-throughs under test ---------------------------------------------------------------
def _plain_main(port: Any, target: str) -> None:
    """A plain OTLP/gRPC pass-through: forward each request as it came, then acknowledge."""
    import grpc

    channel = grpc.insecure_channel(target)
    forward = channel.unary_unary(_EXPORT)

    def export(raw: bytes, context: Any) -> bytes:
        forward(raw, timeout=30)
        return b""

    handler = grpc.method_handlers_generic_handler(_SERVICE, {
        "Export": grpc.unary_unary_rpc_method_handler(export)})
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), handlers=(handler,))
    port.value = server.add_insecure_port("127.0.0.1:0")
    server.start()
    server.wait_for_termination()


class PlainPassThrough:
    def __init__(self, sink: Sink, core: int) -> None:
        ctx = mp.get_context("spawn")
        self._port = ctx.Value("i", 0)
        self._process = ctx.Process(target=_plain_main,
                                    args=(self._port, sink.endpoint.split("//")[1]), daemon=True)
        self._process.start()
        os.sched_setaffinity(self._process.pid, {core})  # type: ignore[arg-type]
        while not self._port.value:
            time.sleep(0.01)
        self.address = f"127.0.0.1:{self._port.value}"
        self.pid = self._process.pid

    def close(self) -> None:
        self._process.kill()
        self._process.join(5)


class GatewayUnderTest:
    def __init__(self, sink: Sink, workdir: Path, core: int | None, *, config: str = "",
                 extra: list[str] | None = None, checkout: Path | None = None) -> None:
        from tracescore.testing import GatewayProcess

        config_file = workdir / f"gateway-{random.getrandbits(32):x}.yaml"
        config_file.write_text(config or "scoring:\n  scorers: [{scorer: similarity}]\n")
        prefix = ["taskset", "-c", str(core)] if core is not None and shutil.which("taskset") \
            else []
        self.process = GatewayProcess(
            ["--config", str(config_file), "--endpoint", sink.endpoint,
             "--journal", str(workdir / f"journal-{random.getrandbits(32):x}.db"),
             "--health", "off", "--http", "off", "--log-level", "warning", *(extra or [])],
            # `python -m` puts the working directory first on sys.path, before PYTHONPATH
            cwd=checkout, command_prefix=prefix, env={"LITELLM_LOCAL_MODEL_COST_MAP": "True",
                                        **({"PYTHONPATH": str(checkout)} if checkout else {})},
        ).start()
        self.address = f"127.0.0.1:{self.process.grpc_port}"
        self.http_port = self.process.http_port

    @property
    def pid(self) -> int:
        return self.process.process.pid

    def close(self) -> None:
        self.process.kill()


class Collector:
    """A real OpenTelemetry Collector (the project's build) doing the same pass-through."""

    def __init__(self, binary: Path, sink: Sink, workdir: Path, core: int) -> None:
        import socket
        import subprocess

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        config = workdir / "collector.yaml"
        config.write_text(
            "receivers:\n  otlp:\n    protocols:\n      grpc:\n"
            f"        endpoint: 127.0.0.1:{port}\n"
            "exporters:\n  otlp:\n"
            f"    endpoint: {sink.endpoint.split('//')[1]}\n    tls: {{insecure: true}}\n"
            "    sending_queue: {enabled: false}\n    compression: none\n"
            "service:\n  telemetry:\n    metrics: {level: none}\n"
            "  pipelines:\n    traces: {receivers: [otlp], exporters: [otlp]}\n")
        self._process = subprocess.Popen(["taskset", "-c", str(core), str(binary), "--config",
                                          str(config)], stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL)
        self.address = f"127.0.0.1:{port}"
        self.pid = self._process.pid
        _wait_port(port)

    def close(self) -> None:
        self._process.kill()
        self._process.wait(5)


def _wait_port(port: int, timeout: float = 30.0) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listens on {port}")


def _collector_binary() -> Path | None:
    try:
        from tracescore.testing._collector import collector_binary
    except ImportError:
        return None
    try:
        return Path(collector_binary())
    except Exception as exc:  # noqa: BLE001 - not built and cannot be built here
        print(f"(no collector: {exc})")
        return None


# --- measurements ------------------------------------------------------------------------------
def _stub(address: str) -> Callable[..., Any]:
    import grpc

    channel = grpc.insecure_channel(address, options=[("grpc.max_send_message_length", 64 << 20)])
    return channel.unary_unary(_EXPORT)


def throughput(address: str, sink: Sink, seconds: float, senders: int = 3) -> float:
    """Spans/s arriving at the sink while `senders` threads push 512-span requests."""
    return grpc_throughput(address, None, sink, seconds, senders)[0]


def grpc_throughput(address: str, pid: int | None, sink: Sink, seconds: float,
                    senders: int = 3) -> tuple[float, float]:
    """(spans/s arriving at the sink, CPU microseconds of process `pid` per forwarded span, 0
    without one) while `senders` threads push 512-span requests over OTLP/gRPC."""
    bodies = [plain_request(512, random.Random(i)) for i in range(8)]
    stop = threading.Event()

    def push(index: int) -> None:
        export = _stub(address)
        n = index
        while not stop.is_set():
            try:
                export(bodies[n % len(bodies)], timeout=30)
            except Exception:  # noqa: BLE001 - refused (backpressure): try again
                time.sleep(0.01)
            n += 1

    forwarded, elapsed, cpu = _pushed(push, stop, sink, seconds, senders, pid)
    return forwarded / elapsed, 1e6 * cpu / max(1, forwarded)


def _pushed(push: Callable[[int], None], stop: threading.Event, sink: Sink, seconds: float,
            senders: int, pid: int | None = None) -> tuple[int, float, float]:
    """Run `senders` `push` threads, warm up, then measure for `seconds`: (spans that reached
    the sink, wall seconds, CPU seconds of process `pid`, 0 without one); stops the threads."""
    threads = [threading.Thread(target=push, args=(i,), daemon=True) for i in range(senders)]
    for thread in threads:
        thread.start()
    time.sleep(min(2.0, seconds / 4))  # warm up
    start_count, start = sink.count, time.perf_counter()
    start_cpu = _cpu_s(pid) if pid is not None else 0.0
    time.sleep(seconds)
    forwarded, elapsed = sink.count - start_count, time.perf_counter() - start
    cpu = _cpu_s(pid) - start_cpu if pid is not None else 0.0
    stop.set()
    for thread in threads:
        thread.join(35)
    return forwarded, elapsed, cpu


def http_throughput(port: int, pid: int, sink: Sink, seconds: float, spans: int,
                    senders: int = 3) -> tuple[float, float]:
    """(spans/s arriving at the sink, gateway CPU microseconds per forwarded span) while
    `senders` keep-alive HTTP clients post `spans`-span protobuf requests."""
    import requests

    bodies = [plain_request(spans, random.Random(i)) for i in range(8)]
    url = f"http://127.0.0.1:{port}/v1/traces"
    stop = threading.Event()

    def push(index: int) -> None:
        with requests.Session() as session:
            n = index
            while not stop.is_set():
                try:
                    session.post(url, data=bodies[n % len(bodies)], timeout=30,
                                 headers={"Content-Type": "application/x-protobuf"})
                except requests.RequestException:
                    time.sleep(0.01)
                n += 1

    forwarded, elapsed, cpu = _pushed(push, stop, sink, seconds, senders, pid)
    return forwarded / elapsed, 1e6 * cpu / max(1, forwarded)


def latency(addresses: dict[str, str], sink: Sink, requests: int,
            rate_per_s: float = 100.0) -> dict[str, list[float]]:
    """Milliseconds from send to arrival at the sink of 10-span requests, one at a time, the
    paths taking turns (so a busy moment of the machine hits them all alike)."""
    exports = {name: _stub(address) for name, address in addresses.items()}
    rng = random.Random(5)
    sent: dict[str, dict[bytes, int]] = {name: {} for name in addresses}
    interval = 1.0 / rate_per_s
    for _ in range(requests):
        for name, export in exports.items():
            trace_id = b"LAT!" + rng.randbytes(12)
            body = plain_request(10, rng, trace_id=trace_id)
            sent[name][trace_id] = time.time_ns()
            export(body, timeout=30)
            time.sleep(interval)
    time.sleep(0.5)
    arrivals = sink.arrivals()
    return {name: [(arrivals[t] - s) / 1e6 for t, s in times.items() if t in arrivals]
            for name, times in sent.items()}


def judge_reply(request: dict[str, Any], latency_s: float = 0.0) -> Any:
    """The stub judge's answer to each step of the relevancy scorer (one statement, on topic)."""
    from tracescore.testing import Reply

    step = request.get("response_format", {}).get("json_schema", {}).get("name", "")
    if step.endswith("statements"):
        content: Any = {"statements": [ANSWER]}
    elif step.endswith("verdicts"):
        content = {"results": [{"result": "yes", "reason": "on topic"}]}
    else:
        content = {"reason": "The score is 1 because it answers."}
    return Reply(content=content, delay=latency_s)


def scoring(replicas: int, workdir: Path, judge_latency_s: float, spans: int,
            concurrency: int, checkout: Path | None = None,
            profile: bool = False) -> dict[str, Any]:
    """Scores/s over `spans` agent spans split by trace id over `replicas` gateways (of
    `checkout`'s package when given); with `profile`, py-spy samples the first scoring
    process while the spans are scored (`_judge_profile`)."""
    from tracescore.testing import StubLLMServer

    sink = Sink()
    with StubLLMServer(responder=functools.partial(judge_reply, latency_s=judge_latency_s)) as stub:
        config = (f"scoring:\n  concurrency: {concurrency}\n  queue_size: {spans}\n"
                  f"  max_held_spans: {spans}\n  max_wait_s: 600\n  scorers:\n"
                  f"    - scorer: relevancy\n      options: {{model: openai/judge, api_base: "
                  f"'{stub.base_url}', api_key: sk-test, timeout: 60}}\n")
        gateways = [GatewayUnderTest(sink, workdir, None, config=config, checkout=checkout)
                    for _ in range(replicas)]
        try:
            # warm-up: one span per replica (litellm import, first connections)
            rng = random.Random(3)
            for index, gateway in enumerate(gateways):
                _stub(gateway.address)(agent_request(rng), timeout=30)
                _wait_count(sink, index + 1, 120)
            base = sink.count
            exports = [_stub(g.address) for g in gateways]
            # routed by trace id; ids drawn until every replica has the same share, as the
            # ideal assumes (a random split of 320 spans is about 5 % uneven, and the run
            # lasts as long as its busiest replica)
            bodies: list[tuple[int, bytes]] = []
            share = [spans // replicas] * replicas
            while len(bodies) < spans:
                trace_id = rng.randbytes(16)
                replica = int.from_bytes(trace_id, "big") % replicas
                if share[replica]:
                    share[replica] -= 1
                    bodies.append((replica, agent_request(rng, trace_id)))
            cpu = CpuShare({
                "gateways": lambda: [g.pid for g in gateways],
                "scoring processes": lambda: [c for g in gateways for c in _children(g.pid)],
                "sink": lambda: [sink.pid],
                "stub judge and benchmark client": lambda: [os.getpid()],
            })
            spy = _start_profile(_children(gateways[0].pid), workdir,
                                 spans * 3 * judge_latency_s / concurrency) if profile else None
            cpu.start()
            start = time.perf_counter()
            for replica, body in bodies:
                exports[replica](body, timeout=30)
            _wait_count(sink, base + spans, 600)
            elapsed = time.perf_counter() - start
            shares = cpu.stop()
            profiled = spy() if spy is not None else None
        finally:
            for gateway in gateways:
                gateway.close()
            sink.close()
    measured = spans / elapsed
    ideal = replicas * concurrency / (3 * judge_latency_s)
    waited = shares.pop("waited_for_a_cpu_s")
    cpu_s: dict[str, float] = shares.pop("cpu_s")  # type: ignore[assignment]
    # a scoring slot's time per score beyond its 3 judge calls, against the time our processes'
    # threads (gateway, scoring, sink) were ready to run but waited for a CPU, per score
    outside = elapsed * replicas * concurrency / spans - 3 * judge_latency_s
    return {"scores_per_s": measured, "ideal_per_s": ideal, "ratio": 100.0 * measured / ideal,
            "cpu_share": shares, "outside_judge_ms_per_score": 1000 * outside,
            "waited_for_a_cpu_ms_per_score": 1000 * waited / spans,
            # CPU per relevancy score (3 judge calls) of the gateways and their scoring processes
            "gateway_cpu_ms_per_score": 1000 * cpu_s["gateways"] / spans,
            "scoring_process_cpu_ms_per_score": 1000 * cpu_s["scoring processes"] / spans,
            **({"profile": profiled} if profiled else {})}


def _start_profile(pids: list[int], workdir: Path,
                   seconds: float) -> Callable[[], dict[str, Any] | None]:
    """py-spy on the first of `pids` for about `seconds` (in a thread); the returned function
    waits for it and gives the parts of the CPU, or None without py-spy or a scoring process."""
    import _judge_profile

    if not pids or not _judge_profile.available():
        print("profile: no py-spy or no scoring process; not profiled")
        return lambda: None
    path = workdir / f"scoring-{pids[0]}.txt"

    def record() -> None:
        try:
            _judge_profile.record(pids[0], max(2.0, 0.8 * seconds), path)
        except (OSError, subprocess.SubprocessError) as exc:  # e.g. ptrace not allowed
            detail = getattr(exc, "stderr", b"") or b""
            print(f"profile: py-spy failed ({exc}; {detail.decode(errors='replace').strip()})")

    thread = threading.Thread(target=record, daemon=True)
    thread.start()

    def finish() -> dict[str, Any] | None:
        thread.join()
        if not path.exists():
            return None
        shares, busy = _judge_profile.parts(path)
        return {"parts_pct": shares, "samples": busy}

    return finish


def _wait_count(sink: Sink, count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while sink.count < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"sink got {sink.count} of {count} spans")
        time.sleep(0.02)


def overload_rss(workdir: Path, seconds: float) -> dict[str, Any]:
    """RSS of a gateway and its scoring process (once warm) while offered ~10x what its next hop
    takes."""
    from tracescore.testing import Reply, StubLLMServer

    sink = Sink(delay_s=0.05)
    with StubLLMServer(default_reply=Reply(content={"statements": [ANSWER]}, delay=5.0)) as stub:
        config = ("scoring:\n  scorers:\n    - scorer: relevancy\n      options: {model: "
                  f"openai/judge, api_base: '{stub.base_url}', api_key: sk-test, timeout: 60}}\n"
                  "limits: {max_pending_spans: 50000}\n")
        gateway = GatewayUnderTest(sink, workdir, None, config=config)
        stop = threading.Event()
        offered = [0]

        def push(seed: int) -> None:
            export = _stub(gateway.address)
            rng = random.Random(seed)
            plain = plain_request(200, rng)
            while not stop.is_set():
                body = agent_request(rng) if rng.random() < 0.2 else plain
                try:
                    export(body, timeout=30)
                    offered[0] += 1
                except Exception:  # noqa: BLE001 - refused: the sender keeps it and retries
                    time.sleep(0.005)

        threads = [threading.Thread(target=push, args=(i,), daemon=True) for i in range(3)]
        for thread in threads:
            thread.start()
        # warm: the scoring process has imported litellm and made its first judge call (its
        # RSS doubles meanwhile: start-up, not growth)
        stub.wait_for_requests(1, timeout=120)
        time.sleep(3)
        pids = [gateway.pid, *_children(gateway.pid)]  # the gateway and its scoring process
        first = sum(_rss(p) for p in pids)
        first_by_pid = [_rss(p) for p in pids]
        peak, samples = first, []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            time.sleep(1)
            now = sum(_rss(p) for p in pids)
            samples.append(now)
            peak = max(peak, now)
        last_by_pid = [_rss(p) for p in pids]
        stop.set()
        for thread in threads:
            thread.join(35)
        gateway.close()
        sink.close()
    return {"rss_start_mb": first, "rss_end_mb": samples[-1] if samples else first,
            "rss_peak_mb": peak, "growth_mb": peak - first, "seconds": seconds,
            "processes": len(pids),
            "rss_by_process_mb": [[a, b] for a, b in zip(first_by_pid, last_by_pid)]}


def _children(pid: int) -> list[int]:
    """Child processes of `pid` (started from any of its threads)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            found += [int(p) for p in task.read_text().split()]
        except OSError:
            continue
    return found


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of one process so far (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _wait_s(pid: int) -> float:
    """Seconds the threads of `pid` spent runnable but waiting for a CPU (/proc schedstat)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            total += int(task.read_text().split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return total / 1e9


def _machine_cpu_s() -> tuple[float, float]:
    """(busy, steal) CPU seconds of the whole machine so far, all cores (from /proc/stat)."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = values[:8]
    tick = os.sysconf("SC_CLK_TCK")
    return (user + nice + system + irq + softirq) / tick, steal / tick


class CpuShare:
    """CPU seconds used by named groups of processes (and by everything else on the machine)
    between `start()` and `stop()`, as shares of the machine's capacity (cores x wall time)."""

    def __init__(self, groups: dict[str, Callable[[], list[int]]]) -> None:
        self._groups = groups
        self._pids: dict[str, list[int]] = {}
        self._start: dict[str, float] = {}

    def _sample(self) -> dict[str, float]:
        sample = {name: sum(_cpu_s(p) for p in self._pids[name]) for name in self._groups}
        sample.update({f"{name}_wait": sum(_wait_s(p) for p in self._pids[name])
                       for name in self._groups})
        sample["machine"], sample["steal"] = _machine_cpu_s()
        sample["wall"] = time.monotonic()
        return sample

    def start(self) -> None:
        self._pids = {name: pids() for name, pids in self._groups.items()}
        self._start = self._sample()

    def stop(self) -> dict[str, float]:
        end = self._sample()
        delta = {k: end[k] - self._start[k] for k in end}
        capacity = (os.cpu_count() or 1) * delta["wall"]
        ours = sum(delta[name] for name in self._groups)
        shares = {f"{name}_pct": 100.0 * delta[name] / capacity for name in self._groups}
        shares["other work on the machine_pct"] = 100.0 * max(0.0, delta["machine"] - ours) \
            / capacity
        shares["machine busy_pct"] = 100.0 * delta["machine"] / capacity
        shares["steal_pct"] = 100.0 * delta["steal"] / capacity
        shares["waited_for_a_cpu_s"] = sum(delta[f"{name}_wait"] for name in self._groups)
        shares["cpu_s"] = {name: delta[name] for name in self._groups}  # type: ignore[assignment]
        return shares


def _rss(pid: int) -> float:
    try:
        return rss_mb(pid)
    except OSError:
        return 0.0


def _pass_through(workdir: Path, core: int, seconds: float, requests: int) -> dict[str, Any]:
    sink = Sink()
    under_test: dict[str, Any] = {}
    try:
        under_test["tracescore serve"] = GatewayUnderTest(sink, workdir, core)
        under_test["tracescore serve, journal sync=normal"] = GatewayUnderTest(
            sink, workdir, core, extra=["--set", "journal.sync=normal"])
        under_test["plain pass-through (Python)"] = PlainPassThrough(sink, core)
        binary = _collector_binary()
        if binary is not None:
            under_test["otelcol (real collector)"] = Collector(binary, sink, workdir, core)
        rates = {name: throughput(t.address, sink, seconds) for name, t in under_test.items()}
        lat = latency({"direct": sink.endpoint.split("//")[1],
                       **{name: t.address for name, t in under_test.items()}}, sink, requests)
    finally:
        for t in under_test.values():
            t.close()
        sink.close()
    direct_p99 = percentiles(lat["direct"])[1]
    rows: list[list[Any]] = []
    result: dict[str, Any] = {}
    for name in ["direct", *under_test]:
        p50, p99 = percentiles(lat[name])
        rate = rates.get(name)
        result[name] = {"spans_per_s": rate, "latency_ms": {"p50": p50, "p99": p99},
                        "added_p99_ms": p99 - direct_p99}
        rows.append([name, rate, p50, p99, p99 - direct_p99])
    print_table(rows, ["path", "spans/s", "p50 ms", "p99 ms", "added p99 ms"],
                title=f"Pass-through on one core ({seconds:.0f} s each, 512-span requests; "
                      f"latency: {requests} 10-span requests per path, taking turns)")
    for name, rate in rates.items():
        if name != "tracescore serve":
            result[f"gateway_over_{name}"] = rates["tracescore serve"] / rate
    return result


def _http_pass_through(workdir: Path, core: int, seconds: float, baseline: Path | None,
                       rounds: int = 3) -> dict[str, Any]:
    """This checkout's OTLP/HTTP receiver against `baseline`'s, in alternating rounds."""
    checkouts = {"this checkout": Path(__file__).resolve().parents[1]}
    if baseline is not None:
        checkouts[f"baseline ({baseline})"] = baseline.resolve()
    sink = Sink()
    samples: dict[tuple[str, int], list[tuple[float, float]]] = {}
    try:
        for _ in range(rounds):
            for name, checkout in checkouts.items():
                gateway = GatewayUnderTest(sink, workdir, core, checkout=checkout,
                                           extra=["--grpc", "off", "--http", "127.0.0.1:0"])
                try:
                    for spans in (512, 10):
                        samples.setdefault((name, spans), []).append(http_throughput(
                            gateway.http_port, gateway.pid, sink, seconds, spans))
                finally:
                    gateway.close()
    finally:
        sink.close()
    result: dict[str, Any] = {}
    rows: list[list[Any]] = []
    for (name, spans), runs in samples.items():
        rate = sum(r for r, _ in runs) / len(runs)
        cpu_us = sum(c for _, c in runs) / len(runs)
        result[f"{name}, {spans}-span requests"] = {"spans_per_s": rate, "cpu_us_per_span": cpu_us,
                                                    "rounds": runs}
        rows.append([name, spans, rate, cpu_us])
    if baseline is not None:
        base = f"baseline ({baseline})"
        for spans in (512, 10):
            ours = result[f"this checkout, {spans}-span requests"]
            theirs = result[f"{base}, {spans}-span requests"]
            result[f"ratio, {spans}-span requests"] = {
                "spans_per_s": ours["spans_per_s"] / theirs["spans_per_s"],
                "cpu_us_per_span": ours["cpu_us_per_span"] / theirs["cpu_us_per_span"]}
    print_table(rows, ["server", "spans/request", "spans/s", "gateway CPU us/span"],
                title=f"OTLP/HTTP pass-through on one core ({rounds} alternating rounds of "
                      f"{seconds:.0f} s, 3 keep-alive senders)")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", help="write results to this path")
    parser.add_argument("--parts", default="pass,scoring,memory",
                        help="comma list of parts to run: pass, scoring, memory, http, client")
    parser.add_argument("--profile", action="store_true",
                        help="scoring: sample the scoring process with py-spy and print where "
                             "its CPU goes")
    parser.add_argument("--baseline", type=Path,
                        help="another checkout whose HTTP receiver `http` measures alongside")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    seconds = 5.0 if args.quick else 15.0
    core = max(os.sched_getaffinity(0))
    results: dict[str, Any] = {"environment": environment(), "quick": args.quick}
    with tempfile.TemporaryDirectory(prefix="bench-gateway-") as tmp:
        workdir = Path(tmp)
        if "pass" in parts:
            results["pass_through"] = _pass_through(workdir, core, seconds,
                                                    200 if args.quick else 1000)
        if "http" in parts:
            results["http_pass_through"] = _http_pass_through(workdir, core, seconds,
                                                              args.baseline)
        if "scoring" in parts:
            judge_latency = 0.5  # as bench_online's throughput run: ideal 5.3 scores/s a replica
            spans = 64 if args.quick else 160  # multiples of the concurrency
            results["scoring"] = {f"{n} replica{'s' if n > 1 else ''}": scoring(
                n, workdir, judge_latency, spans * n, concurrency=8,
                profile=args.profile and n == 1) for n in (1, 2)}
            print_table([[k, v["scores_per_s"], v["ideal_per_s"], v["ratio"]]
                         for k, v in results["scoring"].items()],
                        ["replicas", "scores/s", "ideal/s", "% of ideal"],
                        title=f"Scoring throughput (relevancy, 3 judge calls of {judge_latency} "
                              "s, concurrency 8 per replica)")
            print_table([[k, v["outside_judge_ms_per_score"], v["waited_for_a_cpu_ms_per_score"]]
                         for k, v in results["scoring"].items()],
                        ["replicas", "slot time outside the judge ms/score",
                         "our threads waiting for a CPU ms/score"],
                        title="Where the time beyond the judge goes")
            names = list(next(iter(results["scoring"].values()))["cpu_share"])
            print_table([[k, *(v["cpu_share"][n] for n in names)]
                         for k, v in results["scoring"].items()],
                        ["replicas", *(n.removesuffix("_pct") for n in names)],
                        title="CPU during the scoring runs, % of the machine (cores x wall time)")
            print_table([[k, v["scoring_process_cpu_ms_per_score"], v["gateway_cpu_ms_per_score"],
                          v["scoring_process_cpu_ms_per_score"] + v["gateway_cpu_ms_per_score"]]
                         for k, v in results["scoring"].items()],
                        ["replicas", "scoring process ms", "gateway ms", "together ms"],
                        title="CPU per relevancy score (3 judge calls)")
            profile = results["scoring"]["1 replica"].get("profile")
            if profile:
                print_table([[part, share] for part, share in profile["parts_pct"].items()],
                            ["part of a judge call", "% of busy samples"],
                            title=f"Where the scoring process's CPU goes (py-spy, "
                                  f"{profile['samples']} busy samples)")
            for name, run in results["scoring"].items():
                share = run["cpu_share"]
                if share["machine busy_pct"] >= 90 and run["ratio"] < 100:
                    print(f"{name}: the machine was saturated (busy "
                          f"{share['machine busy_pct']:.0f} %, {share['other work on the machine_pct']:.0f}"
                          " % by other work): the gap to the ideal is time our threads waited "
                          "for a CPU, not CPU the gateway used.")
        if "client" in parts:
            from _judge_client import judge_client

            results["client"] = client = judge_client(120 if args.quick else 240,
                                                      3 if args.quick else 5)
            print_table([[k, v["cpu_ms_per_call"], v["wall_ms_per_call"], v["over_litellm_alone"]]
                         for k, v in client.items()],
                        ["case", "CPU ms/judge call", "wall ms/judge call", "/ litellm alone"],
                        title="The judge client against litellm alone (stub judge, no delay, "
                              "4 calls in flight; process CPU of every thread)")
        if "memory" in parts:
            results["memory"] = memory = overload_rss(workdir, 15.0 if args.quick else 60.0)
            print_table([[memory["seconds"], memory["rss_start_mb"], memory["rss_peak_mb"],
                          memory["growth_mb"]]],
                        ["seconds", "RSS start MB", "RSS peak MB", "growth MB"],
                        title="RSS under ~10x overload (next hop takes 1/10, slow judge)")
    write_json(args.json, results)


if __name__ == "__main__":
    main()
