"""Process isolation of online scoring: real scorers run in the scoring process, results and
failures come back as span events; what cannot go there (unpicklable or unloadable scorers and
jobs, a process that cannot start) runs in the worker thread; a killed child fails its runs and
is restarted; "auto" isolates only judged scorers; forks start their own; shutdown stops it.

One processor (one scoring process) is shared by the module; each test checks its own spans.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracescore
from tracescore import _semconv as sc
from tracescore._exceptions import ConfigurationError, ScorerError
from tracescore.instrument._calls import AgentCall, notify_agent_call
from tracescore.online import OnlineScorer, ScoringSpanProcessor
from tracescore.online._processor import core_of
from tracescore.scoring import JudgeUsage, Scorer, ScoreResult

QUESTION = "What is the capital of France?"
ANSWER = "Paris is the capital of France."


class LockedError(Exception):
    """An error that cannot be pickled (it carries a lock)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.lock = threading.Lock()


class ProbeScorer(Scorer):
    """Reports the process it ran in (score = its pid); the input picks a failure or a stall."""

    id = "probe"
    name = "Probe"
    uses_judge = False

    async def arun(self, *, input: Any, output: Any, ground_truth: Any = None,
                   run_id: str | None = None) -> ScoreResult:
        if input == "fail":
            raise ScorerError("reply is not JSON", scorer_id=self.id, step="analyze",
                              raw_reply="not json {")
        if input == "locked":
            raise LockedError("judge connection pool exhausted")
        if input == "stall":
            await asyncio.sleep(120)
        if isinstance(input, str) and input.startswith("stall, then mark "):
            try:
                await asyncio.sleep(120)
            except asyncio.CancelledError:  # the run was called off: say where it stopped
                Path(input.removeprefix("stall, then mark ")).write_text(str(os.getpid()))
                raise
        if input == "print":  # a chatty scorer must not garble the results channel
            print("noise on the scoring process's stdout", flush=True)
        if input == "unloadable result":
            return ChildOnlyResult(run_id=run_id or "", scorer_id=self.id, scorer_name=self.name,
                                   score=float(os.getpid()), usage=JudgeUsage(model=None))
        return ScoreResult(run_id=run_id or "", scorer_id=self.id, scorer_name=self.name,
                           score=float(os.getpid()), usage=JudgeUsage(model=None))


class JudgedProbeScorer(ProbeScorer):
    """The probe, declared as calling a judge: where the default ("auto") isolates it."""

    id = "judged-probe"
    uses_judge = True


class Pipeline:
    """A private provider -> ScoringSpanProcessor(isolation="process") -> in-memory exporter."""

    def __init__(self, shutdown_timeout_s: float = 5.0, isolation: str = "process",
                 scorers: list[Any] | None = None) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.processor = ScoringSpanProcessor(
            SimpleSpanProcessor(self.exporter),
            scorers or [
                OnlineScorer(ProbeScorer(), agents="probe"),
                OnlineScorer(tracescore.create_content_similarity_scorer(), agents="qa"),
                OnlineScorer(tracescore.create_answer_relevancy_scorer(model="tracescore/offline"),
                             agents="qa")],
            isolation=isolation, max_wait_s=60, shutdown_timeout_s=shutdown_timeout_s,
        )
        self.provider.add_span_processor(self.processor)
        self.tracer = self.provider.get_tracer("tracescore.test")

    def call(self, name: str, input: Any, output: Any = ANSWER, ground_truth: Any = None) -> Any:
        attrs = {sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT, sc.GEN_AI_AGENT_NAME: name}
        with self.tracer.start_as_current_span(f"invoke_agent {name}", attributes=attrs) as span:
            notify_agent_call(AgentCall(span=span, name=name, input=input, output=output,
                                        ground_truth=ground_truth, attributes=attrs))
        return span

    def exported(self, span: Any) -> list[ReadableSpan]:
        span_id = span.get_span_context().span_id
        return [s for s in self.exporter.get_finished_spans() if s.context.span_id == span_id]

    def wait_exported(self, span: Any, timeout: float = 30.0) -> ReadableSpan:
        deadline = time.monotonic() + timeout
        while not self.exported(span):
            assert time.monotonic() < deadline, "span never exported"
            time.sleep(0.01)
        (exported,) = self.exported(span)
        return exported


def results(span: ReadableSpan) -> dict[str, dict[str, Any]]:
    return {str(e.attributes[sc.TS_SCORER_ID]): dict(e.attributes) for e in span.events
            if e.name == sc.GEN_AI_EVALUATION_RESULT and e.attributes}


def wait_until(predicate: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[subprocess.Popen[bytes]]:
    """The scoring processes started during the test, in order."""
    from tracescore.online import _isolation

    processes: list[subprocess.Popen[bytes]] = []
    real_popen = subprocess.Popen

    def recording_popen(*args: Any, **kwargs: Any) -> Any:
        processes.append(real_popen(*args, **kwargs))
        return processes[-1]

    monkeypatch.setattr(_isolation.subprocess, "Popen", recording_popen)
    return processes


@pytest.fixture(scope="module")
def pipeline() -> Iterator[Pipeline]:
    shared = Pipeline()
    yield shared
    shared.provider.shutdown()


def test_real_scorers_run_in_the_scoring_process_and_score_the_span(pipeline: Pipeline) -> None:
    qa = pipeline.call("qa", QUESTION, ANSWER, ground_truth="Paris is the capital of France!")
    probe = pipeline.call("probe", "hi")
    assert pipeline.processor.force_flush(60_000)
    scores = results(pipeline.wait_exported(qa))
    assert set(scores) == {"content-similarity", "answer-relevancy"}
    assert 0.9 < scores["content-similarity"][sc.GEN_AI_EVALUATION_SCORE_VALUE] < 1.0
    relevancy = scores["answer-relevancy"]
    assert sc.ERROR_TYPE not in relevancy, relevancy
    assert relevancy[sc.GEN_AI_EVALUATION_SCORE_VALUE] == 1.0
    (probe_result,) = results(pipeline.wait_exported(probe)).values()
    child_pid = probe_result[sc.GEN_AI_EVALUATION_SCORE_VALUE]
    assert child_pid not in (os.getpid(), 0)
    assert child_pid == core_of(pipeline.processor).isolation.child_pid
    stats = pipeline.processor.stats()
    assert stats["scored"] >= 3 and stats["in_thread"] == 0


def test_a_tracescore_folder_where_the_agent_runs_does_not_shadow_the_scoring_process(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shadow = tmp_path / "tracescore"
    shadow.mkdir()
    (shadow / "__init__.py").write_text("raise ImportError('the folder, not the package')\n")
    monkeypatch.chdir(tmp_path)
    own = Pipeline(scorers=[OnlineScorer(ProbeScorer(), agents="probe")])
    try:
        probe = own.call("probe", "hi")
        assert own.processor.force_flush(60_000)
        (result,) = results(own.wait_exported(probe)).values()
        assert result[sc.GEN_AI_EVALUATION_SCORE_VALUE] not in (os.getpid(), 0)
        assert own.processor.stats()["in_thread"] == 0
    finally:
        own.provider.shutdown()


def test_the_scoring_process_runs_below_the_agents_cpu_priority(pipeline: Pipeline) -> None:
    probe = pipeline.call("probe", "hi")
    assert pipeline.processor.force_flush(60_000)
    (result,) = results(pipeline.wait_exported(probe)).values()
    child = int(result[sc.GEN_AI_EVALUATION_SCORE_VALUE])
    own = os.getpriority(os.PRIO_PROCESS, 0)
    assert os.getpriority(os.PRIO_PROCESS, child) == min(own + 10, 19)


def test_a_failing_scorer_is_a_failure_event_with_its_error(pipeline: Pipeline) -> None:
    span = pipeline.call("probe", "fail")
    assert pipeline.processor.force_flush(30_000)
    (result,) = results(pipeline.wait_exported(span)).values()
    assert result[sc.ERROR_TYPE] == "ScorerError"  # rebuilt in the parent with its fields
    assert result[sc.TS_FAILED_STEP] == "analyze"
    assert "reply is not JSON" in result[sc.GEN_AI_EVALUATION_EXPLANATION]
    assert sc.GEN_AI_EVALUATION_SCORE_VALUE not in result


def test_an_unpicklable_error_arrives_as_its_type_name_and_message(pipeline: Pipeline) -> None:
    span = pipeline.call("probe", "locked")
    assert pipeline.processor.force_flush(30_000)
    (result,) = results(pipeline.wait_exported(span)).values()
    assert result[sc.ERROR_TYPE] == "TracescoreError"
    assert result[sc.GEN_AI_EVALUATION_EXPLANATION] == (
        "LockedError: judge connection pool exhausted")


def test_an_unpicklable_job_runs_in_the_worker_thread(pipeline: Pipeline) -> None:
    before = pipeline.processor.stats()["in_thread"]
    span = pipeline.call("probe", threading.Lock())  # a lock cannot be pickled
    assert pipeline.processor.force_flush(30_000)
    (result,) = results(pipeline.wait_exported(span)).values()
    assert result[sc.GEN_AI_EVALUATION_SCORE_VALUE] == os.getpid()  # ran here, not in the child
    assert pipeline.processor.stats()["in_thread"] == before + 1


def test_a_killed_child_fails_its_runs_and_the_next_call_restarts_it(pipeline: Pipeline) -> None:
    pipeline.call("probe", "warm")  # make sure a child is up
    assert pipeline.processor.force_flush(30_000)
    old = core_of(pipeline.processor).isolation.child_pid
    assert old is not None
    stalled = pipeline.call("probe", "stall")
    wait_until(lambda: bool(core_of(pipeline.processor).isolation.awaiting))
    time.sleep(0.2)  # let the job reach the child
    os.kill(old, signal.SIGKILL)
    (result,) = results(pipeline.wait_exported(stalled)).values()
    assert result[sc.ERROR_TYPE] == "TracescoreError"
    assert "scoring process exited" in result[sc.GEN_AI_EVALUATION_EXPLANATION]
    assert sc.GEN_AI_EVALUATION_SCORE_VALUE not in result

    after = pipeline.call("probe", "again")
    assert pipeline.processor.force_flush(60_000)
    (result,) = results(pipeline.wait_exported(after)).values()
    new_pid = result[sc.GEN_AI_EVALUATION_SCORE_VALUE]
    assert new_pid not in (old, os.getpid())
    ids = Counter(s.context.span_id for s in pipeline.exporter.get_finished_spans())
    assert set(ids.values()) == {1}  # every span exported exactly once


def test_shutdown_stops_the_child_and_exports_held_spans() -> None:
    own = Pipeline(shutdown_timeout_s=0.5)
    own.call("probe", "hi")
    assert own.processor.force_flush(60_000)
    process = core_of(own.processor).isolation.process
    assert process.poll() is None
    stalled = own.call("probe", "stall")
    wait_until(lambda: own.processor.stats()["running"] == 1)
    own.provider.shutdown()
    assert process.poll() is not None
    exported = own.wait_exported(stalled, timeout=1)
    assert not results(exported)
    assert [e.attributes[sc.TS_UNSCORED_REASON] for e in exported.events
            if e.name == sc.TS_UNSCORED] == ["shutdown"]


def test_isolation_is_validated_at_construction() -> None:
    with pytest.raises(ConfigurationError, match="isolation must be 'auto', 'process' or 'thread'"):
        ScoringSpanProcessor(SimpleSpanProcessor(InMemorySpanExporter()), [ProbeScorer()],
                             isolation="subprocess")


def test_a_scorer_printing_to_stdout_does_not_garble_the_results(pipeline: Pipeline) -> None:
    span = pipeline.call("probe", "print")
    assert pipeline.processor.force_flush(30_000)
    (result,) = results(pipeline.wait_exported(span)).values()
    assert result[sc.GEN_AI_EVALUATION_SCORE_VALUE] == core_of(pipeline.processor).isolation.child_pid


def test_auto_isolates_judged_scorers_and_keeps_the_others_in_the_worker_thread() -> None:
    own = Pipeline(isolation="auto", scorers=[JudgedProbeScorer(), ProbeScorer()])
    try:
        span = own.call("any", "hi")
        assert own.processor.force_flush(30_000)
        scores = {name: r[sc.GEN_AI_EVALUATION_SCORE_VALUE]
                  for name, r in results(own.wait_exported(span)).items()}
        child_pid = core_of(own.processor).isolation.child_pid
        assert scores == {"judged-probe": child_pid, "probe": os.getpid()}
        assert own.processor.stats()["in_thread"] == 0  # by design, not as a fallback
    finally:
        own.provider.shutdown()


def test_thread_isolation_starts_no_process() -> None:
    own = Pipeline(isolation="thread", scorers=[JudgedProbeScorer()])
    try:
        span = own.call("any", "hi")
        assert own.processor.force_flush(30_000)
        (result,) = results(own.wait_exported(span)).values()
        assert result[sc.GEN_AI_EVALUATION_SCORE_VALUE] == os.getpid()
        assert core_of(own.processor).isolation is None
    finally:
        own.provider.shutdown()


@pytest.mark.parametrize("executable", ["/bin/false", "/nonexistent/python3"])
def test_when_the_scoring_process_cannot_start_scorers_run_in_the_worker_thread(
        executable: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr("sys.executable", executable)  # exits at once / does not exist
    own = Pipeline(scorers=[ProbeScorer()])
    try:
        spans = [own.call("any", "hi") for _ in range(3)]
        assert own.processor.force_flush(30_000)
        pids = [r[sc.GEN_AI_EVALUATION_SCORE_VALUE] for span in spans
                for r in results(own.wait_exported(span)).values()]
        assert pids == [os.getpid()] * 3  # every run scored, here
        assert own.processor.stats()["in_thread"] == 3
        assert "runs in the worker thread, not in the scoring process" in caplog.text
    finally:
        own.provider.shutdown()


def test_a_forked_process_starts_its_own_scoring_process_and_releases_the_parents() -> None:
    own = Pipeline(scorers=[ProbeScorer()])
    span = own.call("any", "warm")
    assert own.processor.force_flush(30_000)
    own.wait_exported(span)
    parent_process = core_of(own.processor).isolation.process
    reply_r, reply_w = os.pipe()
    hold_r, hold_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the forked process: score one call, report where it ran, linger
        try:
            os.close(reply_r)
            os.close(hold_w)
            mine = own.call("any", "in the fork")
            own.processor.force_flush(30_000)
            (result,) = results(own.wait_exported(mine)).values()
            os.write(reply_w, str(int(result[sc.GEN_AI_EVALUATION_SCORE_VALUE])).encode())
            os.read(hold_r, 1)  # alive (with copies of the parent's descriptors) until told
        finally:
            os._exit(0)
    os.close(reply_w)
    os.close(hold_r)
    try:
        reported = int(os.read(reply_r, 64) or b"0")
        assert reported not in (0, os.getpid(), pid, parent_process.pid)
        # the fork still lives, yet the parent's scoring process sees EOF and exits by itself
        core_of(own.processor).isolation.stop(timeout=10)
        assert parent_process.returncode == 0
    finally:
        os.close(hold_w)
        _reap(pid)
        own.provider.shutdown()


def _reap(pid: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while os.waitpid(pid, os.WNOHANG) == (0, 0):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise AssertionError("the forked process did not finish")
        time.sleep(0.01)


def _only_in(pid: int, value: Any) -> Any:
    """Unpickles only in process `pid`: what a class the scoring process cannot import does."""
    if os.getpid() != pid:
        raise ImportError("No module named 'only_in_the_parent'")
    return value


class ParentOnlyScorer(JudgedProbeScorer):
    id = "parent-only"

    def __reduce__(self) -> Any:
        return _only_in, (os.getpid(), JudgedProbeScorer())


class ParentOnlyInput:
    def __reduce__(self) -> Any:
        return _only_in, (os.getpid(), "hi")


@pytest.mark.parametrize(("scorer", "input", "reason"), [
    (ParentOnlyScorer(), "hi", "the scoring process cannot load it (ImportError"),
    (JudgedProbeScorer(), ParentOnlyInput(), "a job's data cannot be loaded (ImportError"),
])
def test_what_the_scoring_process_cannot_load_runs_in_the_worker_thread(
        scorer: Any, input: Any, reason: str, caplog: pytest.LogCaptureFixture) -> None:
    own = Pipeline(isolation="auto", scorers=[scorer])
    try:
        span = own.call("any", input)
        assert own.processor.force_flush(30_000)
        (result,) = results(own.wait_exported(span)).values()
        assert result[sc.GEN_AI_EVALUATION_SCORE_VALUE] == os.getpid()
        assert own.processor.stats()["in_thread"] == 1
        assert reason in caplog.text
    finally:
        own.provider.shutdown()


def test_a_run_that_times_out_is_stopped_in_the_scoring_process_too(tmp_path: Path) -> None:
    own = Pipeline(scorers=[OnlineScorer(ProbeScorer(), timeout_s=0.5)])
    marker = tmp_path / "cancelled"
    try:
        span = own.call("any", f"stall, then mark {marker}")
        assert own.processor.force_flush(30_000)
        (result,) = results(own.wait_exported(span)).values()
        assert result[sc.ERROR_TYPE] == "TimeoutError"
        wait_until(marker.exists)  # no run keeps going there after we gave up on it
        assert int(marker.read_text()) == core_of(own.processor).isolation.child_pid
    finally:
        own.provider.shutdown()


class ChildOnlyResult(ScoreResult):
    """A result that only the process which made it can unpickle."""

    def __reduce__(self) -> Any:
        return _only_in, (os.getpid(), "a result")


def test_a_result_the_parent_cannot_load_fails_that_run_only() -> None:
    own = Pipeline(scorers=[OnlineScorer(ProbeScorer(), timeout_s=15)])
    try:
        bad = own.call("any", "unloadable result")
        assert own.processor.force_flush(30_000)
        (result,) = results(own.wait_exported(bad)).values()
        assert result[sc.ERROR_TYPE] == "TracescoreError"  # not a timeout: the reply arrived
        assert "result cannot be loaded" in result[sc.GEN_AI_EVALUATION_EXPLANATION]
        good = own.call("any", "hi")  # the same scoring process still answers
        assert own.processor.force_flush(30_000)
        (result,) = results(own.wait_exported(good)).values()
        assert result[sc.GEN_AI_EVALUATION_SCORE_VALUE] == core_of(own.processor).isolation.child_pid
    finally:
        own.provider.shutdown()


def test_shutdown_is_bounded_when_a_job_is_stuck_on_its_way_to_the_child() -> None:
    own = Pipeline(shutdown_timeout_s=0.5, scorers=[ProbeScorer()])
    own.call("any", "warm")
    assert own.processor.force_flush(30_000)
    process = core_of(own.processor).isolation.process
    os.kill(process.pid, signal.SIGSTOP)  # reads nothing more: the pipe fills, the send blocks
    try:
        stuck = own.call("any", "x" * 4_000_000)
        wait_until(lambda: own.processor.stats()["running"] == 1)
        shutdown = threading.Thread(target=own.provider.shutdown, daemon=True)
        shutdown.start()
        shutdown.join(60)  # a hang, not a slow machine, fails this
        assert not shutdown.is_alive(), "shutdown hangs on the stuck send"
        assert process.poll() is not None
        (_,) = own.exported(stuck)  # exported exactly once
    finally:
        if process.poll() is None:
            process.kill()


def test_a_send_cut_short_by_shutdown_fails_as_such_even_before_the_child_is_ready(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # a child that never says ready and reads nothing: the job's frame never gets through
    monkeypatch.setattr("tracescore.online._isolation._CHILD_CODE", "import time; time.sleep(600)")
    own = Pipeline(shutdown_timeout_s=0.5, scorers=[ProbeScorer()])
    span = own.call("any", "x" * 4_000_000)
    wait_until(lambda: own.processor.stats()["running"] == 1)
    worker = core_of(own.processor).worker.thread
    own.provider.shutdown()
    worker.join(30)  # the worker finishes the run the shutdown cut short
    assert own.processor.stats()["in_thread"] == 0  # not run here after the shutdown
    exported = own.wait_exported(span, timeout=1)
    assert not results(exported)
    assert [e.attributes[sc.TS_UNSCORED_REASON] for e in exported.events
            if e.name == sc.TS_UNSCORED] == ["shutdown"]


def test_what_the_interpreter_prints_before_the_channel_opens_is_skipped(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from tracescore.online import _isolation

    # what a sitecustomize or .pth hook printing at start-up would put on the pipe first
    monkeypatch.setattr(_isolation, "_CHILD_CODE", "import sys; sys.stdout.write('x' * 70000); "
                        "sys.stdout.flush(); " + _isolation._CHILD_CODE)
    own = Pipeline(scorers=[ProbeScorer()])
    try:
        span = own.call("any", "hi")
        assert own.processor.force_flush(30_000)
        (result,) = results(own.wait_exported(span)).values()
        assert result[sc.GEN_AI_EVALUATION_SCORE_VALUE] == core_of(own.processor).isolation.child_pid
    finally:
        own.provider.shutdown()


def test_a_child_that_dies_while_starting_is_retried_then_given_up_on(
        monkeypatch: pytest.MonkeyPatch, started: list[subprocess.Popen[bytes]]) -> None:
    from tracescore.online import _isolation

    monkeypatch.setattr(_isolation, "_CHILD_CODE", "raise SystemExit(3)")  # e.g. OOM-killed
    own = Pipeline(scorers=[ProbeScorer()])
    try:
        for n in range(5):
            span = own.call("any", "hi")
            assert own.processor.force_flush(30_000)
            (result,) = results(own.wait_exported(span)).values()
            assert result[sc.GEN_AI_EVALUATION_SCORE_VALUE] == os.getpid()  # scored, here
            wait_until(lambda: core_of(own.processor).isolation.process is None)  # reader saw it die
        assert len(started) == 3  # a later start may succeed; a third failure is final
        assert "3 times (last exit code 3)" in str(core_of(own.processor).isolation.broken)
    finally:
        own.provider.shutdown()


class Unpicklable:
    def __init__(self, n: int) -> None:
        self.n = n

    def __reduce__(self) -> Any:
        raise TypeError(f"cannot pickle connection #{self.n}")


def test_jobs_falling_back_for_the_same_cause_warn_once(caplog: pytest.LogCaptureFixture) -> None:
    own = Pipeline(scorers=[ProbeScorer()])
    try:
        spans = [own.call("any", Unpicklable(n)) for n in range(5)]  # each one's error differs
        assert own.processor.force_flush(30_000)
        for span in spans:
            own.wait_exported(span)
        assert own.processor.stats()["in_thread"] == 5
        warnings = [r for r in caplog.records if "runs in the worker thread" in r.getMessage()]
        assert len(warnings) == 1 and "cannot be pickled" in warnings[0].getMessage()
    finally:
        own.provider.shutdown()


def test_a_child_that_stops_reading_stalls_no_other_scoring() -> None:
    own = Pipeline(isolation="auto",
                   scorers=[OnlineScorer(JudgedProbeScorer(), timeout_s=5), ProbeScorer()])
    warm = own.call("any", "hi")
    assert own.processor.force_flush(30_000)
    own.wait_exported(warm)
    child_pid = core_of(own.processor).isolation.child_pid
    assert child_pid is not None
    os.kill(child_pid, signal.SIGSTOP)  # reads nothing from now on
    try:
        before = own.processor.stats()["scored"]
        stuck = own.call("any", "x" * 4_000_000)  # more than a pipe holds
        after = own.call("any", "y")
        # the in-thread scorer keeps scoring while the frame waits for the child
        wait_until(lambda: own.processor.stats()["scored"] >= before + 2)
        exported = own.wait_exported(stuck)  # the judged run timed out; the span still went
        assert results(exported)["judged-probe"][sc.ERROR_TYPE] == "TimeoutError"
        own.wait_exported(after)
    finally:
        os.kill(child_pid, signal.SIGCONT)
        own.provider.shutdown()


def test_a_child_whose_channel_never_syncs_is_ended_not_left_behind(
        monkeypatch: pytest.MonkeyPatch, started: list[subprocess.Popen[bytes]]) -> None:
    from tracescore.online import _isolation

    # prints more than a start-up preamble may be, then hangs
    monkeypatch.setattr(_isolation, "_MAX_PREAMBLE", 1000)
    monkeypatch.setattr(_isolation, "_CHILD_CODE", "import sys, time; sys.stdout.write('x' * 5000);"
                        " sys.stdout.flush(); time.sleep(600)")
    own = Pipeline(scorers=[ProbeScorer()])
    try:
        span = own.call("any", "hi")
        assert own.processor.force_flush(30_000)
        (result,) = results(own.wait_exported(span)).values()
        assert result[sc.GEN_AI_EVALUATION_SCORE_VALUE] == os.getpid()  # scored here instead
        assert started
        wait_until(lambda: all(p.poll() is not None for p in started))  # none left running
    finally:
        own.provider.shutdown()
