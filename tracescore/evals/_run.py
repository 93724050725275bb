"""One evaluation run (`_Run`): the items under bounded concurrency, each traced and scored, and
the summary of their results."""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import re
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind

from tracescore import _env
from tracescore import _semconv as sc
from tracescore.evals._checks import _Call
from tracescore.evals._results import (
    STEP_CALLBACK,
    STEP_TARGET,
    EvalResult,
    EvalSummary,
    ItemFailure,
    ItemResult,
)
from tracescore.instrument._context import ContextThreadPoolExecutor
from tracescore.instrument._errors import exception_text, record_error
from tracescore.scoring._base import ScorerInput, ToolCall, evaluate_call
from tracescore.scoring._judge_trace import JudgeCall, recording
from tracescore.scoring._provenance import provenance
from tracescore.scoring._runs import Turn
from tracescore.scoring._scoped import history_messages
from tracescore.scoring._trace_data import (
    CONTEXT_KEY,
    EXPECTED_TRAJECTORY_KEY,
    TOOL_CALLS_KEY,
    TRAJECTORY_KEY,
    TURNS_KEY,
    item_scope,
    item_trace,
)

if TYPE_CHECKING:
    from tracescore.scoring import Scorer, ScoreResult

    # a scorer, its name, or a spec {"scorer": name, "options": {...}} (the gateway config's form)
    ScorerSpec = Scorer | str | Mapping[str, Any]


_log = logging.getLogger("tracescore")
T = TypeVar("T")

_TRACER_NAME = "tracescore.evals"

OnItemComplete = Callable[[Mapping[str, Any], Any, "dict[str, ScoreResult]"], "Awaitable[None] | None"]
Progress = Callable[[int, int], None]

# Keys of an item that are not metadata.
_ITEM_KEYS = ("input", "ground_truth", TOOL_CALLS_KEY, CONTEXT_KEY, TRAJECTORY_KEY,
              EXPECTED_TRAJECTORY_KEY, TURNS_KEY)

# --- one run -----------------------------------------------------------------------------------


class _Run:
    """State shared by the items of one run: scorers, target, concurrency, tracer."""

    def __init__(self, *, name: str, run_id: str, scorers: list[Scorer], call: _Call,
                 on_item_complete: OnItemComplete | None, progress: Progress | None,
                 total: int, concurrency: int) -> None:
        self.name = name
        self.run_id = run_id
        self.scorers = scorers
        for scorer in scorers:
            provenance(scorer)  # each scorer's version, from its options before any run
        self.call = call
        self.on_item_complete = on_item_complete
        self.progress = progress
        self.total = total
        self.completed = 0
        self.concurrency = concurrency
        self.executor = ContextThreadPoolExecutor(max_workers=concurrency,
                                                  thread_name_prefix="tracescore-eval")
        self.tracer = trace.get_tracer(_TRACER_NAME)

    def close(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)

    async def all(self, items: list[Mapping[str, Any]]) -> list[ItemResult]:
        """Evaluate every item with `concurrency` workers; results in dataset order.

        Raises `_Interrupted` (after cancelling the other workers) when an item was interrupted.
        """
        results: list[ItemResult | None] = [None] * len(items)
        queue = iter(enumerate(items))  # shared by the workers (one event loop: no lock needed)

        async def worker() -> None:
            for index, item in queue:
                try:
                    results[index] = await self.item(index, item)
                except KeyboardInterrupt as exc:  # leaving the task, it would stop the loop
                    raise _Interrupted(exc) from None

        workers = [asyncio.ensure_future(worker())
                   for _ in range(min(self.concurrency, len(items)))]
        try:
            await asyncio.gather(*workers)
        finally:  # an interrupted (or cancelled) run stops every worker, not only the first
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
        return [r for r in results if r is not None]

    async def item(self, index: int, item: Mapping[str, Any]) -> ItemResult:
        result = await self._item(index, item)
        self.completed += 1
        if self.progress is not None:
            try:
                self.progress(self.completed, self.total)
            except _ITEM_ERRORS:  # a broken progress display must not stop the run
                _log.exception("tracescore: eval progress callback failed")
        return result

    async def _item(self, index: int, item: Mapping[str, Any]) -> ItemResult:
        from tracescore.instrument._calls import ground_truth as ground_truth_scope

        expected = item.get("ground_truth")
        metadata = {k: v for k, v in item.items() if k not in _ITEM_KEYS}
        trace = item_trace(item, f"item {index}")  # checked before the run
        scope = item_scope(item, f"item {index}")
        turns = scope[2]
        value = item["input"] if "input" in item else [t.input for t in turns]
        failures: list[ItemFailure] = []
        scores: dict[str, ScoreResult] = {}
        output: Any = None
        span = self.tracer.start_span(f"{sc.OP_INVOKE_AGENT} {self.name}", kind=SpanKind.INTERNAL,
                                      attributes=self._span_attributes(index, value))
        span_context = span.get_span_context()
        trace_id = format(span_context.trace_id, "032x") if span_context.is_valid else None
        started = time.perf_counter()
        end_ns: int | None = None
        try:
            try:
                with _item_context(span, self.run_id), ground_truth_scope(expected):
                    if turns:
                        turns = await self._converse(turns)
                        output = [t.output for t in turns]
                    else:
                        output = await self.call(value, self.executor)
            except _ITEM_ERRORS as exc:  # a failed item is data, not a crash
                failures.append(_failure(index, STEP_TARGET, None, exc))
                record_error(span, exc, type_name=type(exc).__qualname__)
            except BaseException as exc:  # interrupted or cancelled: the run stops
                record_error(span, exc, type_name=type(exc).__qualname__)
                raise
            duration_ms = (time.perf_counter() - started) * 1000.0
            end_ns = time.time_ns()
            if not failures:
                _set_output(span, output)
                scores = await self._score(span, index, value, output, expected, failures,
                                           trace, (scope[0], scope[1], turns))
                await self._callback(index, item, output, scores, failures)
        finally:
            span.end(end_time=end_ns)  # the span measures the target; scoring is in its events
        return ItemResult(index=index, input=value, output=output, ground_truth=expected,
                          metadata=metadata, scores=scores, failures=tuple(failures),
                          duration_ms=duration_ms, trace_id=trace_id)

    def _span_attributes(self, index: int, value: Any) -> dict[str, Any]:
        attrs: dict[str, Any] = {
            sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT,
            sc.GEN_AI_AGENT_NAME: self.name,
            sc.TS_EVAL_NAME: self.name,
            sc.TS_EVAL_RUN_ID: self.run_id,
            sc.TS_EVAL_ITEM_INDEX: index,
        }
        messages = _input_attr(value)
        if messages is not None:
            attrs[sc.GEN_AI_INPUT_MESSAGES] = messages
        return attrs

    async def _score(self, span: Span, index: int, value: Any, output: Any, expected: Any,
                     failures: list[ItemFailure],
                     trace: tuple[Sequence[ToolCall], Sequence[str]],
                     scope: tuple[Any, Any, tuple[Turn, ...]]) -> dict[str, ScoreResult]:
        from tracescore.online._events import evaluation_events

        turns = scope[2]
        if turns:  # call scorers judge the last answer, with the conversation before it
            value, output = history_messages(turns[:-1]) + history_messages(turns[-1:])[:1], turns[-1].output
        call = ScorerInput(input=value, output=output, ground_truth=expected,
                           tool_calls=tuple(trace[0]), context=tuple(trace[1]),
                           run=scope[0], expected_trajectory=scope[1], turns=turns)
        traced = _env.TRACE_JUDGE.get() and span.is_recording()

        async def judged(scorer: Scorer) -> tuple[Any, Sequence[JudgeCall]]:
            with recording(traced) as calls:  # this task's judge calls
                outcome = await _outcome(evaluate_call(scorer, call))
            return outcome, calls or ()

        outcomes = await asyncio.gather(*(judged(s) for s in self.scorers))
        scores: dict[str, ScoreResult] = {}
        for scorer, (outcome, judge_calls) in zip(self.scorers, outcomes):
            if isinstance(outcome, BaseException):
                if not isinstance(outcome, _ITEM_ERRORS):
                    raise outcome  # KeyboardInterrupt stops the run
                step = getattr(outcome, "step", None)
                step = step if isinstance(step, str) else "score"  # ScorerError, judge errors
                failures.append(_failure(index, step, scorer.id, outcome))
                events = evaluation_events(None, scorer_id=scorer.id, scorer_name=scorer.name,
                                           error=outcome, **provenance(scorer))
            else:
                scores[scorer.id] = outcome
                events = evaluation_events(outcome, scorer_id=scorer.id, scorer_name=scorer.name,
                                           **provenance(scorer))
            if judge_calls:
                _trace_judge(span, scorer, judge_calls, events[0][1])
            for event_name, attributes in events:
                span.add_event(event_name, attributes)
        return scores

    async def _converse(self, turns: tuple[Turn, ...]) -> tuple[Turn, ...]:
        """The turns, each unanswered one answered by the target given the conversation so
        far (chat messages, ending with the turn's user message)."""
        done: list[Turn] = []
        for turn in turns:
            if turn.output is None:
                messages = history_messages((*done, turn))[:-1]
                turn = Turn(input=turn.input, output=await self.call(messages, self.executor),
                            run=turn.run)
            done.append(turn)
        return tuple(done)

    async def _callback(self, index: int, item: Mapping[str, Any], output: Any,
                        scores: dict[str, ScoreResult], failures: list[ItemFailure]) -> None:
        if self.on_item_complete is None:
            return
        try:
            outcome = self.on_item_complete(item, output, dict(scores))
            if inspect.isawaitable(outcome):
                await outcome
        except _ITEM_ERRORS as exc:  # the user's callback failing is data too
            failures.append(_failure(index, STEP_CALLBACK, None, exc))


def _trace_judge(span: Span, scorer: Scorer, calls: Sequence[JudgeCall],
                 result: dict[str, Any]) -> None:
    """The judge traced in an eval run: each call a GenAI `chat` client span, a child of the
    item's span (the eval's own trace), marked as the judge's; the trace id on `result`."""
    from tracescore.online.core import JUDGE_SCOPE, judge_attributes

    item = span.get_span_context()
    tracer = trace.get_tracer(JUDGE_SCOPE.name)
    parent = trace.set_span_in_context(span, otel_context.Context())
    for judge_call in calls:
        judge = tracer.start_span(
            f"{sc.OP_CHAT} {judge_call.model}", context=parent, kind=SpanKind.CLIENT,
            attributes=judge_attributes(judge_call, (item.trace_id, item.span_id), scorer.id,
                                        scorer.name),
            start_time=judge_call.start_ns)
        if judge_call.error_type is not None:
            judge.set_status(trace.Status(trace.StatusCode.ERROR))
        judge.end(end_time=max(judge_call.end_ns, judge_call.start_ns))
    result[sc.TS_JUDGE_TRACE_ID] = trace.format_trace_id(item.trace_id)


def _summarize(run: _Run, results: list[ItemResult], limits: dict[str, float],
               duration_s: float) -> EvalResult:
    means: dict[str, float | None] = {}
    for scorer in run.scorers:
        values = [r.scores[scorer.id].score for r in results if scorer.id in r.scores]
        means[scorer.id] = math.fsum(values) / len(values) if values else None
    verdicts = {sid: means[sid] is not None and means[sid] >= minimum  # type: ignore[operator]
                for sid, minimum in limits.items()}
    passed_items = sum(
        1 for r in results
        if r.ok and all(sid in r.scores and r.scores[sid].score >= m for sid, m in limits.items())
    )
    summary = EvalSummary(
        total_items=len(results),
        passed_items=passed_items,
        failed_items=len(results) - passed_items,
        errored_items=sum(1 for r in results if not r.ok),
        thresholds=dict(limits),
        threshold_results=verdicts,
        duration_s=duration_s,
        unscored={s.id: _why_unscored(s.id, results) for s in run.scorers
                  if results and means[s.id] is None},
    )
    return EvalResult(
        name=run.name,
        run_id=run.run_id,
        scores=means,
        summary=summary,
        items=tuple(results),
        failures=tuple(f for r in results for f in r.failures),
        passed=all(verdicts.values()) if limits else None,
    )


_SCORER_PREFIX = re.compile(r"^scorer '[^']*' failed at step '[^']*': ")  # named already


def _why_unscored(scorer_id: str, results: list[ItemResult]) -> str:
    """"12 of 12 items errored: <first error>" for a scorer that scored no item."""
    first = next((f for r in results for f in r.failures if f.scorer_id == scorer_id), None)
    if first is None:  # the scorer never ran: the target (or the callback) failed first
        first = next((f for r in results for f in r.failures), None)
    counted = f"{sum(1 for r in results if not r.ok)} of {len(results)} items errored"
    if first is None:
        return counted
    if first.scorer_id == scorer_id:
        return f"{counted}: {_SCORER_PREFIX.sub('', first.message)}"
    return f"{counted}: the {first.step} failed: {first.error_type}: {first.message}"


# --- helpers -----------------------------------------------------------------------------------

# What fails one item and lets the run go on: any Exception, and SystemExit (a target that
# calls sys.exit() is a broken item, not a request to end the caller's process).
_ITEM_ERRORS = (Exception, SystemExit)


class _Interrupted(Exception):
    """Carries a KeyboardInterrupt out of the run's tasks (raised from a task, it would stop
    the event loop itself); `arun_evals` re-raises the interrupt."""

    def __init__(self, interrupt: KeyboardInterrupt) -> None:
        super().__init__("evaluation interrupted")
        self.interrupt = interrupt


async def _outcome(coro: Awaitable[T]) -> T | BaseException:
    """`coro`'s result or the BaseException it raised (cancellation excepted).

    Unlike `gather(return_exceptions=True)`, this keeps KeyboardInterrupt and SystemExit inside
    the awaiting task, where the caller decides what they mean.
    """
    try:
        return await coro
    except asyncio.CancelledError:
        raise
    except BaseException as exc:  # noqa: BLE001 - returned to the caller as data
        return exc




def _failure(index: int, step: str, scorer_id: str | None, exc: BaseException) -> ItemFailure:
    return ItemFailure(index=index, step=step, scorer_id=scorer_id,
                       error_type=type(exc).__qualname__, message=exception_text(exc) or type(exc).__name__)


@contextmanager
def _item_context(span: Span, run_id: str) -> Iterator[None]:
    """Make `span` current and mark the context as an eval run (online scoring skips it)."""
    ctx = otel_context.set_value(sc.CTX_EVAL_RUN_ID, run_id, trace.set_span_in_context(span))
    token = otel_context.attach(ctx)
    try:
        yield
    finally:
        otel_context.detach(token)


def _input_attr(value: Any) -> str | None:
    """`gen_ai.input.messages` text for `value`, or None when content capture is off."""
    from tracescore._config import content_settings
    from tracescore.instrument._span_messages import input_messages_attr

    settings = content_settings()
    return input_messages_attr(value, settings) if settings.capture else None


def _set_output(span: Span, value: Any) -> None:
    """Record the target's output as `gen_ai.output.messages` (under content capture)."""
    from tracescore._config import content_settings
    from tracescore.instrument._span_messages import output_messages_attr

    settings = content_settings()
    if settings.capture and span.is_recording():
        span.set_attribute(sc.GEN_AI_OUTPUT_MESSAGES, output_messages_attr(value, settings))
