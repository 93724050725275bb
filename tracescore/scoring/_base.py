"""Scorer abstraction, typed results and the sync-over-async plumbing every scorer shares."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import inspect
import math
import os
import sys
import threading
import uuid
from abc import ABC
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, TypeVar

from tracescore._exceptions import ConfigurationError
from tracescore.scoring._inputs import answer_text, question_text
from tracescore.scoring._names import Declared, declare
from tracescore.scoring._runs import TOOL_CALL, Expectation, Run, Step, Turn

T = TypeVar("T")

# The four step names of a scorer run (they name the step in a ScorerError and in step events).
STEP_PREPROCESS = "preprocess"
STEP_ANALYZE = "analyze"
STEP_SCORE = "score"
STEP_REASON = "reason"
STEPS = (STEP_PREPROCESS, STEP_ANALYZE, STEP_SCORE, STEP_REASON)


@dataclass(frozen=True, kw_only=True)
class JudgeUsage:
    """What the judge cost for one scorer run (summed over its steps and retries)."""

    model: str | None
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    latency_ms: float = 0.0

    def __add__(self, other: JudgeUsage) -> JudgeUsage:
        if self.cost_usd is None and other.cost_usd is None:
            cost = None
        else:
            cost = (self.cost_usd or 0.0) + (other.cost_usd or 0.0)
        return JudgeUsage(
            model=self.model or other.model,
            calls=self.calls + other.calls,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cost_usd=cost,
            latency_ms=self.latency_ms + other.latency_ms,
        )


@dataclass(frozen=True, kw_only=True)
class ScoreResult:
    """The typed result of one scorer run; `to_dict()` gives plain JSON-safe data."""

    run_id: str
    scorer_id: str
    scorer_name: str
    score: float
    label: str | None = None
    reason: str | None = None
    preprocess_prompt: str | None = None
    preprocess_step_result: Any = None
    analyze_prompt: str | None = None
    analyze_step_result: Any = None
    generate_reason_prompt: str | None = None
    usage: JudgeUsage = field(default_factory=lambda: JudgeUsage(model=None))
    step_usage: dict[str, JudgeUsage] = field(default_factory=dict)  # per judge step
    judge_input_truncated: bool = False  # the judged text was cut to the judge input cap

    def to_dict(self) -> dict[str, Any]:
        """Plain data (dicts, lists, str, numbers, None) that `json.dumps` accepts."""
        return asdict(self)


def _band(fraction: float, bands: tuple[tuple[float, str], ...], below: str) -> str:
    """The label of the first (minimum, label) band `fraction` reaches, else `below`."""
    return next((label for minimum, label in bands if fraction >= minimum), below)


def relevancy_label(score: float, scale: float) -> str:
    """Low-cardinality label of an answer-relevancy score."""
    return _band(score / scale, ((0.7, "relevant"), (0.3, "partially_relevant")), "irrelevant")


def similarity_label(score: float, scale: float) -> str:
    """Low-cardinality label of a content-similarity score."""
    return _band(score / scale, ((0.8, "similar"), (0.5, "partially_similar")), "dissimilar")


def faithfulness_label(score: float, scale: float) -> str:
    """Low-cardinality label of a faithfulness score."""
    return _band(score / scale, ((0.7, "faithful"), (0.3, "partially_faithful")), "unfaithful")


def hallucination_label(score: float, scale: float) -> str:
    """Low-cardinality label of a hallucination score (higher is worse; 0 is grounded)."""
    return _band(score / scale, ((0.5, "hallucinated"), (sys.float_info.min, "partially_hallucinated")),
                 "grounded")


def new_run_id() -> str:
    return str(uuid.uuid4())


def check_scale(scale: object) -> float:
    """Validate a `scale` option (a finite number > 0)."""
    if isinstance(scale, bool) or not isinstance(scale, (int, float)):
        raise ConfigurationError(f"scale must be a number > 0, got {scale!r}")
    if not math.isfinite(scale) or scale <= 0:
        raise ConfigurationError(f"scale must be a finite number > 0, got {scale!r}")
    return scale


@dataclass(frozen=True, kw_only=True)
class ToolCall:
    """One tool call the agent made during the scored call; a scorer gets them in call order.

    `arguments` and `result` are the tool's own values (or their recorded JSON text); `error`
    is the error text when the tool failed.
    """

    name: str
    arguments: Any = None
    result: Any = None
    error: str | None = None
    call_id: str | None = None


@dataclass(frozen=True, kw_only=True)
class ScorerInput:
    """Everything a scorer may judge about one call, in one object.

    `input`, `output` and `ground_truth` are the values as given (a string, chat messages, a
    dict, ...); `question` and `answer` are their text (the last user / assistant message).
    `tool_calls` are the call's ToolCalls in call order, `context` its retrieved texts, and
    `conversation` its chat messages (the input's, when the input is a list of messages).
    Run and conversation scorers also get `run` (the whole run's steps in order; when absent,
    `trajectory` is made of the tool calls), `expected_trajectory` (the steps it should take)
    and `turns` (a conversation's turns, in order).
    """

    input: Any
    output: Any
    ground_truth: Any = None
    tool_calls: tuple[ToolCall, ...] = ()
    context: tuple[str, ...] = ()
    conversation: tuple[Any, ...] = ()
    run_id: str | None = None
    run: Run | None = None
    expected_trajectory: Expectation | None = None
    turns: tuple[Turn, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "tool_calls", tuple(self.tool_calls))
        object.__setattr__(self, "turns", tuple(self.turns))
        object.__setattr__(self, "context", tuple(self.context))
        if not self.conversation and _is_messages(self.input):
            object.__setattr__(self, "conversation", tuple(self.input))

    @property
    def question(self) -> str:
        """The input's question text; raises InputError (a ValueError) when it has no text."""
        return question_text(self.input)

    @property
    def answer(self) -> str:
        """The output's answer text; raises InputError (a ValueError) when it has no text."""
        return answer_text(self.output)

    @property
    def trajectory(self) -> Run:
        """The run's steps: `run`, else one tool-call step per tool call."""
        if self.run is not None:
            return self.run
        return Run(steps=tuple(Step(name=c.name, type=TOOL_CALL, arguments=c.arguments,
                                    result=c.result, error=c.error) for c in self.tool_calls))


def _is_messages(value: Any) -> bool:
    return (isinstance(value, (list, tuple)) and bool(value)
            and all(isinstance(m, Mapping) and "role" in m for m in value))


class Scorer(ABC):
    """A scorer: `run()` (sync) and `arun()` (async) turn an input/output pair into a ScoreResult.

    Subclasses set `id`, `name`, `uses_judge` and implement either `evaluate` (one ScorerInput
    in, a ScoreResult out) or, as scorers were written before, `arun`. A subclass whose `arun`
    also takes the keywords `tool_calls` (the call's ToolCalls, in call order) and `context`
    (the retrieved texts) gets them wherever it runs (online, gateway, evals); one that does not
    is called without them. Online scoring, the gateway and evals call `evaluate`.
    """

    id: str
    name: str
    uses_judge: bool
    # A built-in scorer declares the names it is known by and its factory (a function of its
    # module); the registry is filled from these. Your own scorers need neither.
    aliases: ClassVar[tuple[str, ...]] = ()
    factory: ClassVar[str | None] = None
    named_by_user: ClassVar[bool] = False  # its id is the `name` it is built with
    # What it judges: one agent "call" (input, output, its tool calls and context), a whole
    # "run" (`ScorerInput.trajectory`) or a "conversation" (`ScorerInput.turns`).
    scope: str = "call"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("factory"):
            declare(Declared(id=cls.id, aliases=cls.aliases, uses_judge=cls.uses_judge,
                             named_by_user=cls.named_by_user, module=cls.__module__,
                             factory=cls.__dict__["factory"]))

    async def arun(self, *, input: Any, output: Any, ground_truth: Any = None,
                   run_id: str | None = None) -> ScoreResult:
        """Score one input/output pair (by default: `evaluate`; an override may add the
        keywords `tool_calls` and `context`)."""
        if not overrides(self, "evaluate", Scorer):
            raise NotImplementedError(f"{type(self).__name__} implements neither evaluate "
                                      f"nor arun")
        return await self.evaluate(ScorerInput(input=input, output=output,
                                               ground_truth=ground_truth, run_id=run_id))

    async def evaluate(self, call: ScorerInput) -> ScoreResult:
        """Score one call. By default: `arun` with the keywords it takes (a scorer written
        before `evaluate` existed)."""
        if not overrides(self, "arun", Scorer):
            raise NotImplementedError(f"{type(self).__name__} implements neither evaluate "
                                      f"nor arun")
        return await self.arun(**arun_kwargs(self, call))

    def run(self, *, input: Any, output: Any, ground_truth: Any = None,
            run_id: str | None = None, tool_calls: Sequence[ToolCall] = (),
            context: Sequence[str] = ()) -> ScoreResult:
        """Score one input/output pair, blocking; safe inside a running event loop."""
        return run_sync(self.evaluate(ScorerInput(
            input=input, output=output, ground_truth=ground_truth, run_id=run_id,
            tool_calls=tuple(tool_calls), context=tuple(context))))

    @functools.cached_property
    def version(self) -> str:
        """Which scorer produced a result: `{release}+{hash}` of its id, options and judge model
        (computed once; results carry it as `tracescore.scorer.version`). A scorer of your own
        may set its own `version` instead."""
        from tracescore.scoring._provenance import compute_version

        return compute_version(self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id!r})"


def overrides(scorer: object, method: str, base: type) -> bool:
    """Whether `scorer`'s class replaces `base`'s `method` (a subclass written the old way)."""
    return getattr(type(scorer), method, None) is not getattr(base, method)


async def evaluate_call(scorer: Any, call: ScorerInput) -> ScoreResult:
    """`scorer`'s result for `call`: a Scorer's `evaluate`, else (an object with only an `arun`)
    its `arun` with the keywords it takes."""
    if isinstance(scorer, Scorer):
        return await scorer.evaluate(call)
    result: ScoreResult = await scorer.arun(**arun_kwargs(scorer, call))
    return result


def reads_trace(scorer: Any) -> bool:
    """Whether `scorer` takes the tool calls or context of the call it scores: a Scorer that
    implements `evaluate` (its ScorerInput carries them), or an `arun` that takes them."""
    if isinstance(scorer, Scorer) and overrides(scorer, "evaluate", Scorer):
        return True
    return bool(trace_kwargs(scorer, (), ()))


def arun_kwargs(scorer: Any, call: ScorerInput) -> dict[str, Any]:
    """The keywords of `scorer.arun` for `call`: input, output, ground truth and run id, plus
    the trace keywords (`tool_calls`, `context`) its `arun` accepts."""
    return {"input": call.input, "output": call.output, "ground_truth": call.ground_truth,
            "run_id": call.run_id, **trace_kwargs(scorer, call.tool_calls, call.context)}


def trace_kwargs(scorer: Any, tool_calls: Sequence[ToolCall],
                 context: Sequence[str]) -> dict[str, Any]:
    """The trace keywords (`tool_calls`, `context`) that `scorer.arun` accepts.

    Scorers written before these existed take neither; they are called as before.
    """
    arun = getattr(type(scorer), "arun", None)
    accepted = None
    if arun is not None:
        try:
            accepted = _class_trace_parameters(arun)
        except TypeError:  # an `arun` that is not hashable
            pass
    if accepted is None:  # `arun` set on the object itself
        accepted = _trace_parameters(getattr(scorer, "arun", None))
    given = {"tool_calls": tuple(tool_calls), "context": tuple(context)}
    return {name: value for name, value in given.items() if name in accepted}


def _trace_parameters(arun: Any) -> frozenset[str]:
    """Which trace keywords an `arun` function takes."""
    try:
        parameters = inspect.signature(arun).parameters
    except (TypeError, ValueError):
        return frozenset()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return frozenset({"tool_calls", "context"})
    return frozenset({"tool_calls", "context"} & set(parameters))


_class_trace_parameters = functools.lru_cache(maxsize=256)(_trace_parameters)  # once per class


# --- sync over async -------------------------------------------------------------------------
class _LoopThread:
    """One private event loop in a daemon thread, shared by every sync `run()`.

    A long-lived loop (rather than `asyncio.run` per call) keeps litellm's cached async HTTP
    clients valid, and lets `run()` be called from inside a running loop without deadlock.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._thread is None or not self._thread.is_alive():
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def serve() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                thread = threading.Thread(target=serve, name="tracescore-scoring", daemon=True)
                thread.start()
                ready.wait()
                self._loop, self._thread = loop, thread
            return self._loop

    def in_loop_thread(self) -> bool:
        return self._thread is not None and threading.current_thread() is self._thread


_LOOP = _LoopThread()


def _reset_after_fork() -> None:
    global _LOOP
    _LOOP = _LoopThread()  # the parent's loop thread does not exist in a forked child


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` to completion from sync code, in or out of a running event loop.

    The coroutine runs on the private scoring loop with a copy of the caller's context
    variables; the caller's thread blocks until it finishes.
    """
    if _LOOP.in_loop_thread():  # called from a coroutine on our own loop: use a fresh thread
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            ctx = contextvars.copy_context()
            return pool.submit(ctx.run, asyncio.run, coro).result()
    loop = _LOOP.loop()
    done: concurrent.futures.Future[T] = concurrent.futures.Future()
    ctx = contextvars.copy_context()
    tasks: list[asyncio.Task[None]] = []

    def start() -> None:
        tasks.append(ctx.run(loop.create_task, _settle_into(coro, done)))

    try:
        loop.call_soon_threadsafe(start)
        return done.result()
    except BaseException:
        if not done.done():  # the caller was interrupted (Ctrl-C): stop the work it waits for
            loop.call_soon_threadsafe(lambda: [t.cancel() for t in tasks])
        raise


async def _settle_into(coro: Coroutine[Any, Any, T], done: concurrent.futures.Future[T]) -> None:
    """Await `coro` and hand its outcome to `done`, BaseExceptions included.

    A KeyboardInterrupt or SystemExit escaping a task stops the event loop that runs it; caught
    here, it reaches the thread that called `run_sync` instead, and the shared loop lives on.
    """
    try:
        result = await coro
    except asyncio.CancelledError:
        done.cancel()
        raise
    except BaseException as exc:  # noqa: BLE001 - handed over to the waiting thread
        done.set_exception(exc)
    else:
        done.set_result(result)
