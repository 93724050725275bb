"""Offline evaluation: run a target over a dataset, score every output, trace every item.

`run_evals` / `arun_evals` call the target on each item's input (bounded concurrency), score the
output with every scorer (ground truth passed through), and return an `EvalResult`. Every item
is an `invoke_agent {name}` span carrying its score events, exported like live traffic. A failing
target or scorer on one item is recorded as an `ItemFailure`; the other items carry on. A
`SystemExit` from the target, a scorer or the callback is such a failure too; a
`KeyboardInterrupt` stops the whole run at once (items in flight are cancelled, their spans
ended) and is re-raised to the caller.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind

from tracescore import _semconv as sc
from tracescore._exceptions import ConfigurationError
from tracescore.instrument._context import ContextThreadPoolExecutor
from tracescore.instrument._errors import exception_text, record_error
from tracescore.scoring._base import ScorerInput, ToolCall, evaluate_call
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

__all__ = ["EvalResult", "EvalSummary", "ItemFailure", "ItemResult", "arun_evals", "run_evals"]

_log = logging.getLogger("tracescore")
T = TypeVar("T")

DEFAULT_CONCURRENCY = 4
_TRACER_NAME = "tracescore.evals"

OnItemComplete = Callable[[Mapping[str, Any], Any, "dict[str, ScoreResult]"], "Awaitable[None] | None"]
Progress = Callable[[int, int], None]

# Keys of an item that are not metadata.
_ITEM_KEYS = ("input", "ground_truth", TOOL_CALLS_KEY, CONTEXT_KEY, TRAJECTORY_KEY,
              EXPECTED_TRAJECTORY_KEY, TURNS_KEY)

# Steps an item can fail at (ItemFailure.step).
STEP_TARGET = "target"
STEP_CALLBACK = "on_item_complete"


@dataclass(frozen=True, kw_only=True)
class ItemFailure:
    """Why one item (or one scorer on it) has no result: the step, the scorer and the error."""

    index: int
    step: str  # "target", "on_item_complete", or the scorer step ("preprocess", "analyze", ...)
    scorer_id: str | None
    error_type: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "step": self.step,
            "scorer_id": self.scorer_id,
            "error_type": self.error_type,
            "message": self.message,
        }


@dataclass(frozen=True, kw_only=True)
class ItemResult:
    """One dataset item: what went in, what came out, its scores and failures."""

    index: int
    input: Any
    output: Any
    ground_truth: Any
    metadata: dict[str, Any]
    scores: dict[str, ScoreResult]  # scorer id -> result (successful scorers only)
    failures: tuple[ItemFailure, ...] = ()
    duration_ms: float = 0.0  # the target call alone
    trace_id: str | None = None

    @property
    def ok(self) -> bool:
        """True when the target and every scorer succeeded."""
        return not self.failures

    def to_dict(self) -> dict[str, Any]:
        from tracescore._content import to_json_safe

        return {
            "index": self.index,
            "input": to_json_safe(self.input),
            "output": to_json_safe(self.output),
            "ground_truth": to_json_safe(self.ground_truth),
            "metadata": to_json_safe(self.metadata),
            "scores": {sid: r.to_dict() for sid, r in self.scores.items()},
            "failures": [f.to_dict() for f in self.failures],
            "duration_ms": self.duration_ms,
            "trace_id": self.trace_id,
        }


@dataclass(frozen=True, kw_only=True)
class EvalSummary:
    """Counts and verdict of a run.

    `errored_items` had a target or scorer failure; `passed_items` had none and met every
    threshold (every error-free item passes when no thresholds are given);
    `failed_items = total_items - passed_items`. `unscored` names each scorer that scored no
    item of a non-empty run, with why: `"12 of 12 items errored: <first error>"` (a judge that
    is unreachable or refuses the key); `tracescore eval` fails such a run unless told to
    allow errors.
    """

    total_items: int
    passed_items: int
    failed_items: int
    errored_items: int
    thresholds: dict[str, float] = field(default_factory=dict)
    threshold_results: dict[str, bool] = field(default_factory=dict)  # scorer id -> mean met?
    duration_s: float = 0.0
    unscored: dict[str, str] = field(default_factory=dict)  # scorer id -> why it has no score

    def to_dict(self) -> dict[str, Any]:
        return {
            "total_items": self.total_items,
            "passed_items": self.passed_items,
            "failed_items": self.failed_items,
            "errored_items": self.errored_items,
            "thresholds": dict(self.thresholds),
            "threshold_results": dict(self.threshold_results),
            "duration_s": self.duration_s,
            "unscored": dict(self.unscored),
        }


@dataclass(frozen=True, kw_only=True)
class EvalResult:
    """Outcome of `run_evals`: mean score per scorer id, summary, items and failures.

    `scores[id]` is the mean over the items that scorer scored (None when it scored none).
    `passed` is None without thresholds, else True when every scorer's mean meets its minimum.
    """

    name: str
    run_id: str
    scores: dict[str, float | None]
    summary: EvalSummary
    items: tuple[ItemResult, ...]
    failures: tuple[ItemFailure, ...]
    passed: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "run_id": self.run_id,
            "scores": dict(self.scores),
            "passed": self.passed,
            "summary": self.summary.to_dict(),
            "items": [item.to_dict() for item in self.items],
            "failures": [f.to_dict() for f in self.failures],
        }


def run_evals(
    data: Iterable[Mapping[str, Any]],
    scorers: ScorerSpec | Sequence[ScorerSpec],
    target: Any,
    *,
    on_item_complete: OnItemComplete | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    thresholds: Mapping[str, float] | None = None,
    progress: Progress | None = None,
    name: str | None = None,
) -> EvalResult:
    """Evaluate `target` over `data` with `scorers`; blocking twin of `arun_evals`.

    Works with or without a running event loop: the run happens on tracescore's scoring loop
    (the one sync `Scorer.run` uses), so judge HTTP clients stay valid across runs.
    """
    from tracescore.scoring._base import run_sync

    return run_sync(arun_evals(data, scorers, target, on_item_complete=on_item_complete,
                               concurrency=concurrency, thresholds=thresholds,
                               progress=progress, name=name))


async def arun_evals(
    data: Iterable[Mapping[str, Any]],
    scorers: ScorerSpec | Sequence[ScorerSpec],
    target: Any,
    *,
    on_item_complete: OnItemComplete | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    thresholds: Mapping[str, float] | None = None,
    progress: Progress | None = None,
    name: str | None = None,
) -> EvalResult:
    """Evaluate `target` over `data` with `scorers`.

    - `data`: items `{"input": ..., "ground_truth": ...}`, optionally with `tool_calls` (tool
      names, or dicts with name/arguments/result/error/call_id) and `context` (texts) for
      scorers that take them, `trajectory` (the run's steps) and `expected_trajectory` (the
      steps it should take) for run scorers; other keys are kept as metadata. A multi-turn
      item gives `turns` (user messages, or `{"input", "output"}` for turns already answered)
      instead of `input`: the target is called once per unanswered turn with the conversation
      so far (chat messages), and conversation scorers get every turn.
    - `scorers`: scorer objects, or names such as `"keyword-coverage"` (default options).
    - `target`: a sync or async function (or generator) taking the input, or an agent object
      with `ainvoke`/`arun`/`invoke`/`run`. Sync targets run on worker threads.
    - `on_item_complete(item, target_result, scorer_results)`: sync or async, called per item.
    - `thresholds`: `{scorer_id: minimum mean}` giving `EvalResult.passed`.
    - `progress(completed, total)`: called after each item.
    Raises ConfigurationError for bad arguments and for a judge that cannot work (a model
    litellm does not know, an API key not set: see `LiteLLMJudge.preflight`), before anything
    runs, and KeyboardInterrupt
    when the target, a scorer or a callback raised one (the run stops at once).
    """
    items = _check_items(data)
    scorer_list = _check_scorers(scorers)
    call = _resolve_target(target)
    limits = _check_thresholds(thresholds, scorer_list)
    if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
        raise ConfigurationError(f"concurrency must be a positive integer, got {concurrency!r}")
    _preflight(scorer_list)
    run = _Run(
        name=name or _target_name(target),
        run_id=uuid.uuid4().hex,
        scorers=scorer_list,
        call=call,
        on_item_complete=on_item_complete,
        progress=progress,
        total=len(items),
        concurrency=concurrency,
    )
    started = time.perf_counter()
    try:
        results = await run.all(items)
    except _Interrupted as stop:
        raise stop.interrupt from None
    finally:
        run.close()
    return _summarize(run, results, limits, time.perf_counter() - started)


# --- one run -----------------------------------------------------------------------------------


class _Run:
    """State shared by the items of one run: scorers, target, concurrency, tracer."""

    def __init__(self, *, name: str, run_id: str, scorers: list[Scorer], call: _Call,
                 on_item_complete: OnItemComplete | None, progress: Progress | None,
                 total: int, concurrency: int) -> None:
        self.name = name
        self.run_id = run_id
        self.scorers = scorers
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
        outcomes = await asyncio.gather(*(_outcome(evaluate_call(s, call)) for s in self.scorers))
        scores: dict[str, ScoreResult] = {}
        for scorer, outcome in zip(self.scorers, outcomes):
            if isinstance(outcome, BaseException):
                if not isinstance(outcome, _ITEM_ERRORS):
                    raise outcome  # KeyboardInterrupt stops the run
                step = getattr(outcome, "step", None)
                step = step if isinstance(step, str) else "score"  # ScorerError, judge errors
                failures.append(_failure(index, step, scorer.id, outcome))
                events = evaluation_events(None, scorer_id=scorer.id, scorer_name=scorer.name,
                                           error=outcome)
            else:
                scores[scorer.id] = outcome
                events = evaluation_events(outcome, scorer_id=scorer.id, scorer_name=scorer.name)
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


# --- targets -----------------------------------------------------------------------------------

_Call = Callable[[Any, ThreadPoolExecutor], Awaitable[Any]]
_AGENT_METHODS = ("ainvoke", "arun", "invoke", "run")


def _resolve_target(target: Any) -> _Call:
    """Turn a function, coroutine function, generator or agent object into one async call."""
    fn = target
    if not callable(fn):
        fn = next((getattr(target, m) for m in _AGENT_METHODS
                   if callable(getattr(target, m, None))), None)
        if fn is None:
            raise ConfigurationError(
                f"target must be callable or have one of {', '.join(_AGENT_METHODS)}; "
                f"got {type(target).__name__}"
            )
    if inspect.isasyncgenfunction(fn) or inspect.iscoroutinefunction(fn):
        async def call_async(value: Any, executor: ThreadPoolExecutor) -> Any:
            return await _settle(fn(value))
        return call_async

    async def call_sync(value: Any, executor: ThreadPoolExecutor) -> Any:
        # the executor carries the item's context (span, ground truth) into its thread
        result = await asyncio.get_running_loop().run_in_executor(
            executor, _call_and_drain, fn, value)
        return await _settle(result)
    return call_sync


def _call_and_drain(fn: Callable[[Any], Any], value: Any) -> Any:
    """Call a sync target; a returned generator is consumed on the same thread."""
    result = fn(value)
    if inspect.isgenerator(result):
        return _join(list(result))
    return result


async def _settle(result: Any) -> Any:
    """Await coroutines and drain async generators returned by the target."""
    while inspect.isawaitable(result):
        result = await result
    if inspect.isasyncgen(result):
        return _join([chunk async for chunk in result])
    return result


def _join(chunks: list[Any]) -> Any:
    return "".join(chunks) if all(isinstance(c, str) for c in chunks) else chunks


def _target_name(target: Any) -> str:
    """Span/agent name of a run: the function's or the agent class's name."""
    name = getattr(target, "__name__", None)
    if isinstance(name, str) and name and name != "<lambda>":
        return name
    if inspect.isfunction(target) or inspect.ismethod(target):
        return "eval"
    return type(target).__name__


# --- validation --------------------------------------------------------------------------------


def _check_items(data: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    if isinstance(data, (str, bytes)) or not isinstance(data, Iterable):
        raise ConfigurationError("data must be an iterable of items like {'input': ...}")
    items = list(data)
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise ConfigurationError(f"item {i} must be a mapping, got {type(item).__name__}")
        if "input" not in item and TURNS_KEY not in item:
            raise ConfigurationError(f"item {i} has no 'input' key (keys: {sorted(item)})")
        item_trace(item, f"item {i}")
        item_scope(item, f"item {i}")
    return items


def _check_scorers(scorers: Any) -> list[Scorer]:
    from tracescore.scoring._registry import resolve_scorers

    single = hasattr(scorers, "arun") or isinstance(scorers, (str, Mapping))
    found = resolve_scorers([scorers] if single else list(scorers or ()))
    if not found:
        raise ConfigurationError("run_evals needs at least one scorer")
    seen: set[str] = set()
    for scorer in found:
        if not (hasattr(scorer, "arun") and isinstance(getattr(scorer, "id", None), str)):
            raise ConfigurationError(f"not a scorer: {scorer!r} (needs an 'id' and 'arun')")
        if scorer.id in seen:
            raise ConfigurationError(f"two scorers share the id {scorer.id!r}")
        seen.add(scorer.id)
    return found


def _preflight(scorers: list[Scorer]) -> None:
    """Check every judge (model known, API key set) before the first item."""
    from tracescore.scoring._judge_api import Judge
    from tracescore.scoring._resolve import preflight_judge

    for scorer in scorers:
        judge = getattr(scorer, "judge", None)
        if isinstance(judge, Judge):
            try:
                preflight_judge(judge)
            except ConfigurationError as exc:
                raise ConfigurationError(f"scorer {scorer.id!r}: {exc}") from None


def _check_thresholds(thresholds: Mapping[str, float] | None,
                      scorers: list[Scorer]) -> dict[str, float]:
    limits: dict[str, float] = {}
    ids = {s.id for s in scorers}
    for sid, minimum in (thresholds or {}).items():
        if sid not in ids:
            raise ConfigurationError(
                f"threshold for unknown scorer {sid!r} (scorers: {', '.join(sorted(ids))})")
        if isinstance(minimum, bool) or not isinstance(minimum, (int, float)) \
                or not math.isfinite(minimum):
            raise ConfigurationError(f"threshold for {sid!r} must be a number, got {minimum!r}")
        limits[sid] = float(minimum)
    return limits


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
