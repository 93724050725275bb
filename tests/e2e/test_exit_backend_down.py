"""A program does not hang at exit, or in `flush()`, because its OTLP backend is down.

The README's snippet runs as a real script against a port where nothing listens, with its
`tracescore.flush()` and without: the endpoint is found refusing connections, so the exporter is
not left retrying with backoff for seconds (the SDK's "retrying in" notes count its attempts),
and one line says how many spans were not delivered and to where. The same for the async
streaming example. A live endpoint still gets every span, and no such line.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pytest_examples import find_examples

from tracescore.testing import OTLPReceiver
from tracescore.testing._tools import free_port

ROOT = Path(__file__).resolve().parents[2]
EXIT_BUDGET_S = 120  # a budget for a loaded machine, not a timing: it used to take 7-10 s


def _readme_snippet(flush: bool) -> str:
    snippet = next(e.source for e in find_examples(ROOT / "README.md")
                   if 'exporter="otlp-http"' in e.source)
    lines = snippet.splitlines()
    flushed = [n for n, line in enumerate(lines) if line.startswith("tracescore.flush(")]
    assert len(flushed) == 1, "the README's snippet ends with tracescore.flush()"
    if not flush:  # without its optional flush() the spans go out at exit
        del lines[flushed[0]]
    return "\n".join(lines[:flushed[0]] + ["__CALLS__"] + lines[flushed[0]:])


def _run(tmp_path: Path, exporter: str, endpoint: str, calls: int,
         flush: bool = False) -> subprocess.CompletedProcess[str]:
    script = _readme_snippet(flush).replace('exporter="otlp-http"', f"exporter={exporter!r}")
    script = script.replace("__CALLS__", "".join(
        f'support("And question {n}?")\n' for n in range(calls - 1))) + "\n"
    (tmp_path / "snippet.py").write_text(script)
    return _python(tmp_path, ["snippet.py"], endpoint)


def _python(cwd: Path, args: list[str], endpoint: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRACESCORE_"))}
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=EXIT_BUDGET_S, check=False)


def _one_loss_line(done: subprocess.CompletedProcess[str], when: str) -> tuple[int, str]:
    """The one line saying how many spans were lost and where; nothing retried, nothing else."""
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert "did not finish within" not in done.stderr, done.stderr
    assert "retrying in" not in done.stderr, done.stderr  # no backoff round: one attempt at most
    assert "Transient error" not in done.stderr, done.stderr
    lost = re.findall(r"^tracescore: (\d+) span\(s\) not delivered to (\S+)" + when + "$",
                      done.stderr, re.MULTILINE)
    assert len(lost) == 1 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    return int(lost[0][0]), lost[0][1]


AT_EXIT = r" \(it refuses connections; not retried at exit\)"
AT_FLUSH = r" since the last flush \(it refuses connections; not retried\)"


@pytest.mark.parametrize(("exporter", "host", "calls"), [
    ("otlp-http", "127.0.0.1", 2), ("otlp-grpc", "localhost", 1)])
def test_flush_does_not_retry_an_endpoint_that_refuses_connections(
        tmp_path: Path, exporter: str, host: str, calls: int) -> None:
    """The README's snippet as written: its flush() says what was lost, in one line; exit has
    nothing left to say."""
    port = free_port()
    done = _run(tmp_path, exporter, f"http://{host}:{port}", calls, flush=True)
    count, where = _one_loss_line(done, AT_FLUSH)
    assert count == calls
    assert where.startswith((f"http://{host}:{port}/", f"{host}:{port}")), where


def test_the_async_streaming_example_with_its_endpoint_down(tmp_path: Path) -> None:
    done = _python(ROOT / "examples", ["async_streaming_agent.py"], f"http://127.0.0.1:{free_port()}")
    count, _ = _one_loss_line(done, AT_FLUSH)
    assert count > 0


@pytest.mark.parametrize(("exporter", "host", "calls"), [
    ("otlp-http", "127.0.0.1", 1), ("otlp-grpc", "127.0.0.1", 3), ("otlp-http", "localhost", 3)])
def test_exit_does_not_retry_an_endpoint_that_refuses_connections_and_says_what_was_lost(
        tmp_path: Path, exporter: str, host: str, calls: int) -> None:
    port = free_port()  # bound and closed again: nothing listens there
    done = _run(tmp_path, exporter, f"http://{host}:{port}", calls)

    count, where = _one_loss_line(done, AT_EXIT)
    assert count == calls
    assert where.startswith((f"http://{host}:{port}/", f"{host}:{port}")), where


@pytest.mark.parametrize("flush", [False, True])
def test_exit_delivers_to_a_live_endpoint_without_a_loss_line(
        tmp_path: Path, otlp_receiver: OTLPReceiver, flush: bool) -> None:
    done = _run(tmp_path, "otlp-http", otlp_receiver.http_endpoint, 2, flush=flush)

    assert done.returncode == 0, done.stderr
    assert "not delivered" not in done.stderr, done.stderr
    spans: list[Any] = otlp_receiver.wait_for_spans(2, timeout=30)
    assert {s.name for s in spans} == {"invoke_agent support"}
