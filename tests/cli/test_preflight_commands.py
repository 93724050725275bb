"""One preflight for every command that judges: `serve`, `rescore` (and its dry run) refuse a judge
that cannot work (no API key, unknown model) with exit 2 before anything starts, as `eval` and
`calibrate` do; `rescore` exits 3 when every score failed."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from _gateway_helpers import agent_trace, sender

from tracescore._exporters import OTLPJsonFileExporter

SCRIPT = Path(sys.executable).parent / "tracescore"
KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "MISTRAL_API_KEY", "GROQ_API_KEY",
        "DEEPSEEK_API_KEY", "XAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")
# (judge model, what the refusal names): providers whose key is missing, and a model litellm
# does not know
CANNOT_WORK = [("openai/gpt-4o-mini", "OPENAI_API_KEY is not set"),
               ("anthropic/claude-sonnet-4-5-20250929", "ANTHROPIC_API_KEY is not set"),
               ("mistral/mistral-small-latest", "MISTRAL_API_KEY is not set"),
               ("openai/gpt-4o-mini-nonexistent", "unknown judge model")]


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _tracescore(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OTEL_", "TRACESCORE_")) and k not in KEYS}
    env.update({"COLUMNS": "200", "NO_COLOR": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    return subprocess.run([str(SCRIPT), *args], cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=120, check=False)


@pytest.fixture
def traces(tmp_path: Path) -> Path:
    path = tmp_path / "traces.jsonl"
    with sender(OTLPJsonFileExporter(path)) as tracer:
        for _ in range(3):
            agent_trace(tracer, plain_children=1)
    return path


@pytest.mark.parametrize(("model", "named"), CANNOT_WORK)
def test_serve_refuses_a_judge_that_cannot_work_before_ready(model: str, named: str,
                                                              tmp_path: Path) -> None:
    done = _tracescore("serve", "--judge-model", model, "--grpc", f"127.0.0.1:{_port()}",
                       "--http", "off", "--health", "off",
                       "--endpoint", f"http://127.0.0.1:{_port()}", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert named in done.stderr and "answer-relevancy" in done.stderr
    assert '"ready"' not in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("dry_run", [False, True])
@pytest.mark.parametrize(("model", "named"), CANNOT_WORK)
def test_rescore_refuses_a_judge_that_cannot_work(model: str, named: str, dry_run: bool,
                                                  traces: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    done = _tracescore("rescore", str(traces), "-s", "relevancy", "--judge-model", model,
                       *(["--dry-run"] if dry_run else ["-o", str(out)]), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert named in done.stderr and "Traceback" not in done.stderr
    assert not out.exists()


def test_rescore_fails_when_every_score_failed(traces: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    config = tmp_path / "judge.yaml"
    config.write_text(  # a judge that is configured right, at an address where nothing answers
        "scoring:\n  scorers:\n    - {scorer: relevancy, options: {model: openai/judge-stub, "
        f"api_base: 'http://127.0.0.1:{_port()}/v1', api_key: sk-test, max_retries: 0}}}}\n")
    done = _tracescore("rescore", str(traces), "-c", str(config), "-o", str(out), cwd=tmp_path)
    assert done.returncode == 3, (done.stdout, done.stderr)
    assert "0 scores, 3 failed" in done.stdout and "every score failed (3)" in done.stderr
    assert out.exists()  # the spans are written, with the failures on them
