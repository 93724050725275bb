"""A program does not hang at exit because its OTLP backend is down.

The README's snippet runs as a real script against a port where nothing listens: at interpreter
exit the endpoint is found refusing connections, so the exporter is not left retrying with backoff
for seconds (the SDK's "retrying in" notes count its attempts), and one line says how many spans
were not delivered and to where. A live endpoint still gets every span, and no such line.
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


def _readme_snippet() -> str:
    snippet = next(e.source for e in find_examples(ROOT / "README.md")
                   if 'exporter="otlp-http"' in e.source)
    # without its optional flush() the spans go out at exit, which is what is tried here
    return "\n".join(line for line in snippet.splitlines()
                     if not line.startswith("tracescore.flush("))


def _run(tmp_path: Path, exporter: str, endpoint: str, calls: int) -> subprocess.CompletedProcess[str]:
    script = _readme_snippet().replace('exporter="otlp-http"', f"exporter={exporter!r}")
    script += "".join(f'\nsupport("And question {n}?")' for n in range(calls - 1)) + "\n"
    (tmp_path / "snippet.py").write_text(script)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRACESCORE_"))}
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
    return subprocess.run([sys.executable, "snippet.py"], cwd=tmp_path, env=env, text=True,
                          capture_output=True, timeout=EXIT_BUDGET_S, check=False)


@pytest.mark.parametrize(("exporter", "host", "calls"), [
    ("otlp-http", "127.0.0.1", 1), ("otlp-grpc", "127.0.0.1", 3), ("otlp-http", "localhost", 3)])
def test_exit_does_not_retry_an_endpoint_that_refuses_connections_and_says_what_was_lost(
        tmp_path: Path, exporter: str, host: str, calls: int) -> None:
    port = free_port()  # bound and closed again: nothing listens there
    done = _run(tmp_path, exporter, f"http://{host}:{port}", calls)

    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert "did not finish within" not in done.stderr, done.stderr
    assert "retrying in" not in done.stderr, done.stderr  # no backoff round: one attempt at most
    lost = re.findall(r"^tracescore: (\d+) span\(s\) not delivered to (\S+) \(it refuses "
                      r"connections; not retried at exit\)$", done.stderr, re.MULTILINE)
    assert len(lost) == 1, done.stderr
    count, where = lost[0]
    assert int(count) == calls
    assert where.startswith((f"http://{host}:{port}/", f"{host}:{port}")), where


def test_exit_delivers_to_a_live_endpoint_without_a_loss_line(
        tmp_path: Path, otlp_receiver: OTLPReceiver) -> None:
    done = _run(tmp_path, "otlp-http", otlp_receiver.http_endpoint, 2)

    assert done.returncode == 0, done.stderr
    assert "not delivered" not in done.stderr, done.stderr
    spans: list[Any] = otlp_receiver.wait_for_spans(2, timeout=30)
    assert {s.name for s in spans} == {"invoke_agent support"}
