"""A judge that cannot work, configured in process: `configure()` says so at once, in one clear
line per scorer naming the key it needs, and the agent still runs; each result is then a failure
event (error.type), never a missing score a reader's code trips over unexplained."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from _helpers import shut_down_pipelines
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracescore

KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "MISTRAL_API_KEY")
CASES = [  # (scorer, the key its judge needs)
    (lambda m: tracescore.create_answer_relevancy_scorer(model=m), "openai/gpt-4o-mini"),
    (lambda m: tracescore.create_multi_turn_judge_scorer(model=m, criterion="Helped."),
     "anthropic/claude-haiku-4-5"),
    (lambda m: tracescore.create_llm_judge_scorer(name="polite", instructions="Polite.",
                                                  model=m), "mistral/mistral-small-latest"),
]


@pytest.fixture
def no_keys(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for key in KEYS:
        monkeypatch.delenv(key, raising=False)
    yield
    shut_down_pipelines()


@pytest.mark.parametrize(("make", "model"), CASES, ids=[model for _, model in CASES])
def test_configure_names_the_missing_key_of_each_judge(
        make, model: str, no_keys: None, caplog: pytest.LogCaptureFixture) -> None:
    scorer = make(model)
    with caplog.at_level(logging.WARNING, logger="tracescore"):
        tracescore.configure(exporter=InMemorySpanExporter(), batch=False,
                             scorers=[scorer, tracescore.create_content_similarity_scorer()])
    (line,) = [r.getMessage() for r in caplog.records if "results will be failures" in r.getMessage()]
    provider = model.split("/")[0].upper()
    assert f"scorer {scorer.id!r}" in line and f"{provider}_API_KEY" in line


def test_the_agent_runs_and_its_result_is_a_failure_event(
        no_keys: None, caplog: pytest.LogCaptureFixture) -> None:
    exporter = InMemorySpanExporter()

    @tracescore.agent(name="geo")
    def geo(question: str) -> str:
        return "Paris"

    with caplog.at_level(logging.WARNING, logger="tracescore"):
        handle = tracescore.configure(exporter=exporter, batch=False, scorers=[
            tracescore.create_answer_relevancy_scorer(model="openai/gpt-4o-mini")])
    assert geo("Capital of France?") == "Paris"
    handle.shutdown(30)
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent geo"]
    (event,) = [e for e in span.events if e.name == "gen_ai.evaluation.result"]
    assert event.attributes["error.type"].endswith("JudgeAuthenticationError")
    assert "gen_ai.evaluation.score.value" not in event.attributes


def test_no_warning_for_judges_that_can_work(no_keys: None, caplog: pytest.LogCaptureFixture,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with caplog.at_level(logging.WARNING, logger="tracescore"):
        tracescore.configure(exporter=InMemorySpanExporter(), batch=False, scorers=[
            tracescore.create_answer_relevancy_scorer(model="tracescore/offline"),
            tracescore.create_llm_judge_scorer(name="polite", instructions="Polite.",
                                               model="openai/gpt-4o-mini")])
    assert not [r for r in caplog.records if "results will be failures" in r.getMessage()]


def test_the_check_loads_no_judge_client_into_the_agents_process(tmp_path) -> None:
    """With the judge in the scoring process (the default), configure() still names a common
    provider's missing key, and litellm is never imported into the agent's process."""
    import os
    import subprocess
    import sys

    app = tmp_path / "app.py"
    app.write_text(
        "import sys, tracescore\n"
        "from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter\n"
        "tracescore.configure(exporter=InMemorySpanExporter(), batch=False, scorers=[\n"
        "    tracescore.create_answer_relevancy_scorer(model='openai/gpt-4o-mini')])\n"
        "print('litellm' in sys.modules)\n")
    env = {k: v for k, v in os.environ.items() if k not in KEYS}
    done = subprocess.run([sys.executable, str(app)], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
    assert "OPENAI_API_KEY" in done.stderr and "results will be failures" in done.stderr
