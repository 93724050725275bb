"""SIGTERM flushes: a real process with batched (and held) spans is stopped the way a container is, and
a real receiver counts what arrived. The signal then does what it did before tracescore."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator

import pytest
from _helpers import shut_down_pipelines

import tracescore
from tracescore import ConfigurationError, _signals
from tracescore.testing import OTLPReceiver

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="POSIX signals")

_APP = textwrap.dedent("""
    import os, signal, sys, time
    import tracescore
    from opentelemetry import trace

    endpoint, mode = sys.argv[1], sys.argv[2]
    if mode == "app-handler":
        def on_term(signum, frame):
            print("app handler ran", flush=True)
            os._exit(3)  # ends at once: whatever was not exported before this is lost
        signal.signal(signal.SIGTERM, on_term)
    options = {}
    if mode == "scoring":
        import asyncio
        from tracescore import ContentSimilarityScorer

        class Slow(ContentSimilarityScorer):
            async def arun(self, **kwargs):
                await asyncio.sleep(1.0)
                return await super().arun(**kwargs)

        options = {"scorers": [Slow()], "online": {"isolation": "thread"}}
    tracescore.configure(exporter="otlp-grpc", endpoint=endpoint, service_name="sigterm-app",
                         flush_on_sigterm=None if mode != "off" else False, **options)

    @tracescore.agent(name="worker")
    def work(i):
        return f"done {i}"

    for i in range(20):
        work(i)
    print("ready", flush=True)
    while True:
        time.sleep(0.05)
""")


@pytest.fixture(autouse=True)
def _restore_sigterm() -> Iterator[None]:
    before = signal.getsignal(signal.SIGTERM)
    shut_down_pipelines()
    yield
    shut_down_pipelines()
    _signals.uninstall()
    signal.signal(signal.SIGTERM, before)


def _run(endpoint: str, mode: str) -> subprocess.Popen[str]:
    env = dict(os.environ, OTEL_BSP_SCHEDULE_DELAY="600000")  # spans stay batched until flushed
    env.pop("TRACESCORE_FLUSH_ON_SIGTERM", None)
    proc = subprocess.Popen([sys.executable, "-c", _APP, endpoint, mode], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if line.strip() != "ready":
        proc.kill()
        raise AssertionError(f"app did not start: {line!r} {proc.communicate()[1][-3000:]}")
    return proc


def _stop(proc: subprocess.Popen[str]) -> tuple[int, str]:
    proc.send_signal(signal.SIGTERM)
    try:
        out, _ = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    return proc.returncode, out


def _workers(receiver: OTLPReceiver) -> list[str]:
    return [s.name for s in receiver.spans if s.name == "invoke_agent worker"]


def test_sigterm_exports_every_batched_span_then_exits_as_sigterm_does(
        otlp_receiver: OTLPReceiver) -> None:
    proc = _run(otlp_receiver.grpc_endpoint, "default")
    assert _workers(otlp_receiver) == []  # still batched
    code, _ = _stop(proc)
    assert code == -signal.SIGTERM  # the default action still ends the process
    assert len(_workers(otlp_receiver)) == 20


def test_sigterm_flushes_before_the_applications_handler_runs(otlp_receiver: OTLPReceiver) -> None:
    proc = _run(otlp_receiver.grpc_endpoint, "app-handler")
    code, out = _stop(proc)
    assert (code, out.strip()) == (3, "app handler ran")
    assert len(_workers(otlp_receiver)) == 20


def test_sigterm_exports_spans_held_for_scoring(otlp_receiver: OTLPReceiver) -> None:
    proc = _run(otlp_receiver.grpc_endpoint, "scoring")
    code, _ = _stop(proc)
    assert code == -signal.SIGTERM
    spans = [s for s in otlp_receiver.spans if s.name == "invoke_agent worker"]
    assert len(spans) == 20  # scored, or exported with the reason they are unscored
    assert all(s.events for s in spans)


def test_flush_on_sigterm_off_leaves_sigterm_alone(otlp_receiver: OTLPReceiver) -> None:
    proc = _run(otlp_receiver.grpc_endpoint, "off")
    code, _ = _stop(proc)
    assert code == -signal.SIGTERM
    assert _workers(otlp_receiver) == []  # documented: nothing flushed without the handler


def test_sigterm_flush_is_bounded_with_a_collector_that_never_answers() -> None:
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def accept() -> None:
        try:
            while True:
                held.append(server.accept()[0])
        except OSError:
            pass

    threading.Thread(target=accept, daemon=True).start()
    try:
        proc = _run(f"http://127.0.0.1:{server.getsockname()[1]}", "default")
        code, _ = _stop(proc)  # returns: the flush gives up after its bound
        assert code == -signal.SIGTERM
    finally:
        server.close()
        for conn in held:
            conn.close()


def test_an_ignored_sigterm_stays_ignored() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    tracescore.configure(exporter="none")
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN


def test_the_previous_handler_comes_back_when_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    def mine(signum: int, frame: object) -> None:
        pass

    # a test before this one in the same process may have left tracescore's handler replaced
    # by its own while still counted as installed (the app's handler wins, by design)
    monkeypatch.setattr(_signals, "_installed", False)
    signal.signal(signal.SIGTERM, mine)
    tracescore.configure(exporter="none")
    assert signal.getsignal(signal.SIGTERM) is _signals._handle
    tracescore.configure(exporter="none", flush_on_sigterm=False)
    assert signal.getsignal(signal.SIGTERM) is mine
    monkeypatch.setenv("TRACESCORE_FLUSH_ON_SIGTERM", "false")
    tracescore.configure(exporter="none")
    assert signal.getsignal(signal.SIGTERM) is mine


def test_configure_from_another_thread_leaves_signals_alone() -> None:
    before = signal.getsignal(signal.SIGTERM)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            tracescore.configure(exporter="none")
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert errors == [] and signal.getsignal(signal.SIGTERM) is before


@pytest.mark.parametrize("value", ["yes", 1, 0.0])
def test_flush_on_sigterm_must_be_a_bool(value: object) -> None:
    with pytest.raises(ConfigurationError, match="flush_on_sigterm"):
        tracescore.configure(exporter="none", flush_on_sigterm=value)  # type: ignore[arg-type]
