"""run_evals / `tracescore eval` never hang on SystemExit or KeyboardInterrupt.

SystemExit raised by a target, a scorer or a callback is one item's failure; KeyboardInterrupt
stops the run at once (items in flight cancelled, every span ended) and reaches the caller;
the CLI then exits with 130. Every run goes through `_bounded`, so a regression fails here
instead of hanging the suite.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.trace import StatusCode

from tracescore import _semconv as sc
from tracescore.cli._otlp import read_spans
from tracescore.evals import arun_evals, run_evals
from tracescore.scoring import ContentSimilarityScorer, Scorer, ScoreResult

T_LIMIT = 60.0  # far above any run here; only a hang reaches it

DATA = [{"input": f"q{i}", "ground_truth": f"a{i}"} for i in range(6)]


def _bounded(fn: Callable[[], Any], limit: float = T_LIMIT) -> Any:
    """fn() in a daemon thread; its result or its exception (BaseException too), or a failure
    when it has not returned within `limit` seconds (the bug: run_evals never returning)."""
    box: dict[str, Any] = {}

    def call() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["error"] = exc

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(limit)
    if thread.is_alive():
        pytest.fail(f"run did not return within {limit:.0f}s (hang)")
    if "error" in box:
        raise box["error"]
    return box["value"]


def _make_target(kind: str, bad: str, error: Callable[[], BaseException]) -> Any:
    """A target of `kind` answering `a{i}` for `q{i}`, raising `error()` for input `bad`."""
    def answer(question: str) -> str:
        if question == bad:
            raise error()
        return "a" + question[1:]

    if kind == "sync":
        return answer
    if kind == "async":
        async def aanswer(question: str) -> str:
            await asyncio.sleep(0)
            return answer(question)
        return aanswer
    if kind == "generator":
        def chunks(question: str) -> Any:
            yield answer(question)
        return chunks
    if kind == "async-generator":
        async def achunks(question: str) -> Any:
            await asyncio.sleep(0)
            yield answer(question)
        return achunks
    raise AssertionError(kind)


TARGET_KINDS = ["sync", "async", "generator", "async-generator"]
EXITS: list[Callable[[], BaseException]] = [
    lambda: SystemExit(), lambda: SystemExit(0), lambda: SystemExit(3),
    lambda: SystemExit("bye"),
]


class _RaisingScorer(Scorer):
    """Scores 1.0, except on output `bad`, where it raises `error()` (sync or async path)."""

    id = "raising"
    name = "Raising"
    uses_judge = False

    def __init__(self, bad: str, error: Callable[[], BaseException]) -> None:
        self.bad, self.error = bad, error

    async def arun(self, *, input: Any, output: Any, ground_truth: Any = None,
                   run_id: str | None = None) -> ScoreResult:
        await asyncio.sleep(0)
        if output == self.bad:
            raise self.error()
        return ScoreResult(run_id=run_id or "r", scorer_id=self.id, scorer_name=self.name,
                           score=1.0)


# --- SystemExit: one item fails, the run goes on -----------------------------------------------


@pytest.mark.parametrize("kind", TARGET_KINDS)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(bad=st.integers(0, len(DATA) - 1), exit_index=st.integers(0, len(EXITS) - 1),
       concurrency=st.integers(1, 4))
def test_system_exit_from_a_target_fails_that_item_only(span_exporter, kind: str, bad: int,
                                                        exit_index: int,
                                                        concurrency: int) -> None:
    span_exporter.clear()
    target = _make_target(kind, f"q{bad}", EXITS[exit_index])
    result = _bounded(lambda: run_evals(DATA, ContentSimilarityScorer(), target,
                                        concurrency=concurrency))

    assert result.summary.total_items == len(DATA)
    (failure,) = result.failures
    assert (failure.index, failure.step, failure.error_type) == (bad, "target", "SystemExit")
    assert all(item.scores["content-similarity"].score == 1.0
               for item in result.items if item.index != bad)
    spans = {s.attributes[sc.TS_EVAL_ITEM_INDEX]: s for s in span_exporter.get_finished_spans()}
    assert len(spans) == len(DATA)
    assert spans[bad].status.status_code is StatusCode.ERROR
    assert spans[bad].attributes[sc.ERROR_TYPE] == "SystemExit"


@pytest.mark.parametrize("where", ["scorer", "on_item_complete", "progress"])
def test_system_exit_from_a_scorer_or_callback_is_data_too(where: str) -> None:
    bad = "a2"
    scorers: list[Scorer] = [ContentSimilarityScorer()]
    callbacks: dict[str, Any] = {}
    if where == "scorer":
        scorers.append(_RaisingScorer(bad, SystemExit))
    elif where == "on_item_complete":
        async def on_item_complete(item: Any, output: Any, scores: Any) -> None:
            if output == bad:
                raise SystemExit(1)
        callbacks["on_item_complete"] = on_item_complete
    else:
        def progress(done: int, total: int) -> None:
            raise SystemExit(1)
        callbacks["progress"] = progress

    result = _bounded(lambda: run_evals(DATA, scorers, _make_target("sync", "-", SystemExit),
                                        **callbacks))

    assert result.summary.total_items == len(DATA)
    assert all("content-similarity" in item.scores for item in result.items)
    if where == "progress":
        assert result.failures == ()
    else:
        (failure,) = result.failures
        assert failure.index == 2 and failure.error_type == "SystemExit"
        assert failure.step == ("score" if where == "scorer" else "on_item_complete")


# --- KeyboardInterrupt: the run stops at once ---------------------------------------------------


def _stuck_target(kind: str, bad: str, release: threading.Event) -> Any:
    """Raises KeyboardInterrupt on `bad`; every other input waits for `release` (never set in
    time): only a run that stops at once returns."""
    def answer(question: str) -> str:
        if question == bad:
            time.sleep(0.05)  # let the other workers start and get stuck first
            raise KeyboardInterrupt
        release.wait(T_LIMIT)
        return "late"

    if kind == "sync":
        return answer

    async def aanswer(question: str) -> str:
        if question == bad:
            await asyncio.sleep(0.05)
            raise KeyboardInterrupt
        while not release.is_set():
            await asyncio.sleep(0.01)
        return "late"
    return aanswer


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_keyboard_interrupt_stops_the_run_and_reaches_the_caller(span_exporter, kind: str) -> None:
    release = threading.Event()
    try:
        with pytest.raises(KeyboardInterrupt):
            _bounded(lambda: run_evals(DATA, ContentSimilarityScorer(),
                                       _stuck_target(kind, "q1", release), concurrency=3))
    finally:
        release.set()
    spans = span_exporter.get_finished_spans()
    # the interrupted item and the two stuck in flight are ended (errors); no other item started
    assert sorted(s.attributes[sc.TS_EVAL_ITEM_INDEX] for s in spans) == [0, 1, 2]
    assert all(s.status.status_code is StatusCode.ERROR for s in spans)
    by_index = {s.attributes[sc.TS_EVAL_ITEM_INDEX]: s for s in spans}
    assert by_index[1].attributes[sc.ERROR_TYPE] == "KeyboardInterrupt"
    # the shared scoring loop survived: sync scoring and a new run still work
    assert ContentSimilarityScorer().run(input="abc", output="abc").score == 1.0
    again = _bounded(lambda: run_evals(DATA, ContentSimilarityScorer(),
                                       _make_target(kind, "-", KeyboardInterrupt)))
    assert again.failures == () and again.summary.total_items == len(DATA)


@pytest.mark.parametrize("where", ["scorer", "on_item_complete"])
def test_keyboard_interrupt_from_a_scorer_or_callback_stops_the_run(where: str) -> None:
    scorers: list[Scorer] = [ContentSimilarityScorer()]
    extra: dict[str, Any] = {}
    if where == "scorer":
        scorers.append(_RaisingScorer("a0", KeyboardInterrupt))
    else:
        def on_item_complete(item: Any, output: Any, scores: Any) -> None:
            raise KeyboardInterrupt
        extra["on_item_complete"] = on_item_complete
    completed: list[int] = []
    with pytest.raises(KeyboardInterrupt):
        _bounded(lambda: run_evals(DATA, scorers, _make_target("sync", "-", SystemExit),
                                   concurrency=1,
                                   progress=lambda done, total: completed.append(done), **extra))
    assert completed == []  # stopped on the first item


def test_async_twin_raises_keyboard_interrupt_in_the_callers_loop() -> None:
    release = threading.Event()
    try:
        with pytest.raises(KeyboardInterrupt):
            _bounded(lambda: asyncio.run(arun_evals(
                DATA, ContentSimilarityScorer(), _stuck_target("async", "q0", release),
                concurrency=2)))
    finally:
        release.set()


def test_ctrl_c_while_waiting_cancels_the_run() -> None:
    """A KeyboardInterrupt delivered to the thread blocked in run_evals cancels the work."""
    started, cancelled = threading.Event(), threading.Event()

    async def slow(question: str) -> str:
        started.set()
        try:
            await asyncio.sleep(T_LIMIT)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    def interrupt_when_started() -> None:
        started.wait(T_LIMIT)
        os.kill(os.getpid(), signal.SIGINT)  # as Ctrl-C: the main thread gets it

    threading.Thread(target=interrupt_when_started, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        run_evals(DATA[:1], ContentSimilarityScorer(), slow)
    assert cancelled.wait(10), "the run went on after the caller was interrupted"


# --- the CLI ------------------------------------------------------------------------------------

AGENT = '''
import asyncio, sys

async def interrupts(question):
    if question == "q1":
        raise KeyboardInterrupt
    await asyncio.sleep(0)
    return "a" + question[1:]

def exits(question):
    if question == "q1":
        sys.exit(4)
    return "a" + question[1:]

async def hangs(question):
    print("started", flush=True)
    await asyncio.sleep(3600)
'''


def _cli(tmp_path: Path, target: str, **kwargs: Any) -> subprocess.Popen[str]:
    (tmp_path / "agent.py").write_text(AGENT)
    (tmp_path / "qa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in DATA))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRACESCORE_"))}
    env.update({"NO_COLOR": "1", "COLUMNS": "200", "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    script = Path(sys.executable).parent / "tracescore"
    return subprocess.Popen([str(script), "eval", "qa.jsonl", "--target", f"agent.py:{target}",
                             "-s", "similarity", "-c", "1", "--spans-file", "spans.jsonl"],
                            cwd=tmp_path, env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, **kwargs)


def _finish(proc: subprocess.Popen[str], timeout: float = 120) -> tuple[str, str]:
    """The process's output once it ends; killed (and the test failed) if it hangs."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"tracescore eval did not end within {timeout:.0f}s (hang)")


def test_cli_exits_130_when_the_target_raises_keyboard_interrupt(tmp_path: Path) -> None:
    proc = _cli(tmp_path, "interrupts")
    _out, err = _finish(proc)
    assert proc.returncode == 130, err
    assert "Interrupted" in err
    spans = read_spans(tmp_path / "spans.jsonl")  # flushed on the way out
    assert sorted(s.attributes[sc.TS_EVAL_ITEM_INDEX] for s in spans) == [0, 1]


def test_cli_counts_system_exit_as_a_failed_item(tmp_path: Path) -> None:
    proc = _cli(tmp_path, "exits")
    out, err = _finish(proc)
    assert proc.returncode == 0, err
    assert "SystemExit" in out
    assert len(read_spans(tmp_path / "spans.jsonl")) == len(DATA)


def test_cli_exits_130_promptly_on_sigint(tmp_path: Path) -> None:
    proc = _cli(tmp_path, "hangs")
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "started"
    proc.send_signal(signal.SIGINT)
    _out, err = _finish(proc, timeout=60)
    assert proc.returncode == 130, err
