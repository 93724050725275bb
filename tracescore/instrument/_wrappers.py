"""The wrapt wrappers, one per function flavour (sync, coroutine, generator, async generator).

Generator spans cover the whole iteration; the span is made current around each step only, so no
context token is ever held across a `yield`.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Generator
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context

from tracescore._suppress import SUPPRESS_KEY

if TYPE_CHECKING:
    from tracescore.instrument._operation import _Op

_get_current = otel_context.get_current

# --- wrappers (one per function flavour) -----------------------------------------------------


def _sync_wrapper(op: _Op) -> Callable[..., Any]:
    def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        ctx = _get_current()
        if ctx.get(SUPPRESS_KEY):
            return wrapped(*args, **kwargs)
        call = op.open(ctx, instance, args, kwargs)
        if call is None:
            return wrapped(*args, **kwargs)
        token = call.enter()
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as exc:
            call.fail(token, exc)
            raise
        call.done(token, result)
        return result

    return wrapper


def _calling(traced: Callable[..., Any]) -> Callable[..., Any]:
    """The wrapt wrapper of the coroutine and generator flavours: call the function at once
    (argument errors raise here, as without the decorator) and let `traced` follow the
    object it returns, from when that starts running."""

    def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        ctx = _get_current()
        if ctx.get(SUPPRESS_KEY):
            return wrapped(*args, **kwargs)
        return traced(wrapped(*args, **kwargs), ctx, instance, args, kwargs)

    return wrapper


def _async_wrapper(op: _Op) -> Callable[..., Any]:
    async def traced(coro: Any, ctx: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        # The span starts when the coroutine starts running: one never awaited makes no span.
        call = op.open(ctx, instance, args, kwargs)
        if call is None:
            return await coro
        token = call.enter()
        try:
            result = await coro
        except BaseException as exc:
            call.fail(token, exc)
            raise
        call.done(token, result)
        return result

    return _calling(traced)


# Generator spans cover the whole iteration, but the span is current (and the ground-truth slot
# open) only while the user's generator runs a step: no context token is held across a yield.
# Each step sends on what the consumer sent, or throws in what it threw (`step`, `arg`).


def _generator_wrapper(op: _Op) -> Callable[..., Any]:
    def traced(
        gen: Generator[Any, Any, Any], ctx: Any, instance: Any, args: Any, kwargs: Any
    ) -> Any:
        # Runs from the first step on: a generator that is never iterated makes no span.
        call = op.open(ctx, instance, args, kwargs)
        if call is None:
            return (yield from gen)
        items = call.start_stream()
        step, arg = gen.send, None
        while True:
            token = call.enter()
            try:
                item = step(arg)
            except StopIteration as stop:
                call.done(token, call.stream_output(stop.value))
                return stop.value
            except BaseException as exc:
                call.fail(token, exc)
                raise
            call.leave(token)
            if items is not None:
                items.append(item)
            try:
                step, arg = gen.send, (yield item)
            except GeneratorExit:  # closed early: close() or garbage collection
                token = call.enter()
                try:
                    gen.close()
                except BaseException as exc:
                    call.fail(token, exc)
                    raise
                call.done(token, call.stream_output())
                raise
            except BaseException as exc:  # noqa: BLE001 - thrown in by the consumer: forward it
                step, arg = gen.throw, exc

    return _calling(traced)


def _async_generator_wrapper(op: _Op) -> Callable[..., Any]:
    async def traced(
        agen: AsyncGenerator[Any, Any], ctx: Any, instance: Any, args: Any, kwargs: Any
    ) -> Any:
        call = op.open(ctx, instance, args, kwargs)
        if call is None:  # telemetry failed to start: plain forwarding
            sent: Any = None
            while True:
                try:
                    item = await agen.asend(sent)
                except StopAsyncIteration:
                    return
                sent = yield item
        items = call.start_stream()
        step, arg = agen.asend, None
        while True:
            token = call.enter()
            try:
                item = await step(arg)
            except StopAsyncIteration:
                call.done(token, call.stream_output())
                return
            except BaseException as exc:
                call.fail(token, exc)
                raise
            call.leave(token)
            if items is not None:
                items.append(item)
            try:
                step, arg = agen.asend, (yield item)
            except GeneratorExit:  # aclose() or garbage collection
                token = call.enter()
                try:
                    await agen.aclose()
                except BaseException as exc:
                    call.fail(token, exc)
                    raise
                call.done(token, call.stream_output())
                raise
            except BaseException as exc:  # noqa: BLE001 - thrown in by the consumer: forward it
                step, arg = agen.athrow, exc

    return _calling(traced)
