"""`@agent`, `@tool`, `@llm` and `@span`: decorators that turn calls into GenAI spans.

Built on wrapt, so methods, classmethods and staticmethods bind correctly and introspection
(`__wrapped__`, signature, docstring, `inspect.iscoroutinefunction` …) still sees the original.
The sync/async/generator/async-generator wrapper is chosen once, at decoration time. Generator
spans cover the whole iteration; the span is made current around each step only, so no context
token is ever held across a `yield`.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncGenerator, Callable, Generator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar, overload

import wrapt
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Tracer

from tracescore import _semconv as sc
from tracescore._config import ContentSettings, content_settings
from tracescore._content import cap_name, serialize
from tracescore._exceptions import ConfigurationError
from tracescore._suppress import _KEY as _SUPPRESS_KEY
from tracescore._version import __version__
from tracescore.instrument import _calls, _openinference
from tracescore.instrument._errors import record_error
from tracescore.instrument._span_messages import (
    _get,
    input_messages_attr,
    output_messages_attr,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["agent", "llm", "span", "tool"]

_log = logging.getLogger("tracescore")
F = TypeVar("F", bound=Callable[..., Any])
_UNSET: Any = object()

_get_current = otel_context.get_current
_attach = otel_context.attach
_detach = otel_context.detach
_set_span_in_context = trace.set_span_in_context

# --- tracer ----------------------------------------------------------------------------------

_tracer_cache: tuple[object, Tracer] | None = None


def _tracer() -> Tracer:
    """The tracescore tracer of the current global provider (cached per provider)."""
    global _tracer_cache
    provider = trace.get_tracer_provider()
    cached = _tracer_cache
    if cached is not None and cached[0] is provider:
        return cached[1]
    tracer = trace.get_tracer("tracescore", __version__, tracer_provider=provider)
    _tracer_cache = (provider, tracer)
    return tracer


_logged: set[str] = set()


def _log_once(key: str, message: str) -> None:
    if key not in _logged:
        _logged.add(key)
        _log.warning(message, exc_info=True)


# --- call inputs -----------------------------------------------------------------------------


def _in_class_body(fn: Callable[..., Any]) -> bool:
    qualname = getattr(fn, "__qualname__", "") or ""
    parts = qualname.split(".")
    return len(parts) > 1 and parts[-2] != "<locals>"


class _Binder:
    """Maps a call's arguments to names without `inspect.Signature.bind` on each call."""

    __slots__ = ("_method_like", "_modes", "_var_pos")

    def __init__(self, fn: Callable[..., Any]) -> None:
        if inspect.ismethod(fn):  # wrapt passes a bound method's receiver as `instance`
            fn = fn.__func__
        try:
            params = list(inspect.signature(fn).parameters.values())
        except (TypeError, ValueError):
            params = [inspect.Parameter("args", inspect.Parameter.VAR_POSITIONAL)]
        kinds = inspect.Parameter
        self._var_pos = next((p.name for p in params if p.kind is kinds.VAR_POSITIONAL), None)
        self._method_like = (
            bool(params) and params[0].name in ("self", "cls") and _in_class_body(fn)
        )
        # mode False: called as a plain function; mode True: the first parameter is the receiver
        self._modes = (self._mode(params), self._mode(params[1:]))

    @staticmethod
    def _mode(params: list[inspect.Parameter]) -> tuple[tuple[str, ...], Any]:
        kinds = inspect.Parameter
        positional = tuple(
            p.name for p in params if p.kind in (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)
        )
        single: Any = _UNSET
        if len(params) == 1 and params[0].kind not in (kinds.VAR_POSITIONAL, kinds.VAR_KEYWORD):
            p = params[0]
            single = (p.name, None if p.default is p.empty else p.default)
        return positional, single

    def _resolve(self, instance: Any, args: tuple[Any, ...]) -> tuple[Any, tuple[Any, ...]]:
        if instance is not None:
            return self._modes[1], args
        if self._method_like and args:  # receiver passed positionally (e.g. classmethod chaining)
            return self._modes[1], args[1:]
        return self._modes[0], args

    def value(self, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The single argument when the function takes one, else a dict of arguments by name."""
        (names, single), args = self._resolve(instance, args)
        if single is not _UNSET:
            if args:
                return args[0]
            name, default = single
            return kwargs.get(name, default)
        return self._arguments(names, args, kwargs)

    def find(self, name: str, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The value passed for parameter `name` (by keyword or position), or None."""
        if name in kwargs:
            return kwargs[name]
        (names, _single), args = self._resolve(instance, args)
        try:
            index = names.index(name)
        except ValueError:
            return None
        return args[index] if index < len(args) else None

    def arguments(
        self, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> dict[str, Any]:
        """The passed arguments as a dict by parameter name (defaults not filled in)."""
        (names, _single), args = self._resolve(instance, args)
        return self._arguments(names, args, kwargs)

    def _arguments(
        self, names: tuple[str, ...], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> dict[str, Any]:
        out = dict(zip(names, args))
        if len(args) > len(names):
            out[self._var_pos or "args"] = args[len(names) :]
        if kwargs:
            out.update(kwargs)
        return out


# --- the operation a decorator describes -----------------------------------------------------

_AGENT, _TOOL, _LLM, _SPAN = "agent", "tool", "llm", "span"


def _llm_result_attrs(span: Any, result: Any) -> None:
    """Token usage, response model/id and finish reasons of an OpenAI/litellm-like response."""

    get = _get
    if result is None or isinstance(result, (str, bytes, int, float, bool, list, tuple)):
        return
    usage = get(result, "usage")
    if usage is not None:
        for key, names in (
            (sc.GEN_AI_USAGE_INPUT_TOKENS, ("prompt_tokens", "input_tokens")),
            (sc.GEN_AI_USAGE_OUTPUT_TOKENS, ("completion_tokens", "output_tokens")),
        ):
            for name in names:
                value = get(usage, name)
                if isinstance(value, int) and not isinstance(value, bool):
                    span.set_attribute(key, value)
                    break
    model = get(result, "model")
    if isinstance(model, str) and model:
        span.set_attribute(sc.GEN_AI_RESPONSE_MODEL, cap_name(model))
    response_id = get(result, "id")
    if isinstance(response_id, str) and response_id:
        span.set_attribute(sc.GEN_AI_RESPONSE_ID, cap_name(response_id))
    choices = get(result, "choices")
    if isinstance(choices, (list, tuple)):
        reasons = [cap_name(r) for r in (get(c, "finish_reason") for c in choices)
                   if isinstance(r, str)]
        if reasons:
            span.set_attribute(sc.GEN_AI_RESPONSE_FINISH_REASONS, reasons)


def _assemble_chunks(items: list[Any]) -> dict[str, Any] | None:
    """A chat-completion-like dict from streamed chunks (`choices[0].delta.content`), or None."""
    text: list[str] = []
    response: dict[str, Any] = {}
    finish_reason = None
    for item in items:
        choices = _get(item, "choices")
        if not isinstance(choices, (list, tuple)):
            return None
        for choice in choices[:1]:
            content = _get(_get(choice, "delta"), "content")
            if isinstance(content, str):
                text.append(content)
            finish_reason = _get(choice, "finish_reason") or finish_reason
        for key in ("usage", "model", "id"):
            value = _get(item, key)
            if value is not None:
                response[key] = value
    message = {"role": "assistant", "content": "".join(text)}
    response["choices"] = [{"message": message, "finish_reason": finish_reason or "stop"}]
    return response


def _join_items(items: list[Any], kind: str) -> Any:
    """The output of a generator call: its items, joined when they are strings.

    Streamed chat chunks become the assembled text (a response dict for `@llm`).
    """
    if not items:
        return items
    if all(type(i) is str for i in items):
        return "".join(items)
    try:
        response = _assemble_chunks(items)
    except Exception:  # noqa: BLE001 - unknown chunk shapes: no assembled response
        response = None
    if response is None:
        return items
    return response if kind == _LLM else response["choices"][0]["message"]["content"]


class _Op:
    """Everything about one decorated function that can be computed at decoration time."""

    __slots__ = (
        "attrs",
        "binder",
        "capture",
        "conversation_id",
        "ground_truth",
        "input_key",
        "is_agent",
        "is_llm",
        "kind",
        "model_from_call",
        "name",
        "needs_value",
        "output_key",
        "public_attrs",
        "span_kind",
        "span_name",
    )

    def __init__(
        self,
        kind: str,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        capture_content: bool | None = None,
        attributes: Mapping[str, Any] | None = None,
        conversation_id: str | Callable[[Any], str | None] | None = None,
        ground_truth: Any = _UNSET,
        model: str | None = None,
        provider: str | None = None,
        description: str | None = None,
    ) -> None:
        _validate(name, capture_content, attributes, conversation_id, model, provider, description)
        self.kind = kind
        self.name = name or getattr(fn, "__name__", None) or type(fn).__name__
        self.capture = capture_content
        self.binder = _Binder(fn)
        self.is_agent = kind == _AGENT
        self.is_llm = kind == _LLM
        self.ground_truth = ground_truth
        self.model_from_call = kind == _LLM and model is None
        attrs: dict[str, Any] = dict(attributes or {})
        if kind == _AGENT:
            self.span_name = f"{sc.OP_INVOKE_AGENT} {self.name}"
            self.span_kind = SpanKind.INTERNAL
            attrs[sc.GEN_AI_OPERATION_NAME] = sc.OP_INVOKE_AGENT
            attrs[sc.GEN_AI_AGENT_NAME] = self.name
            if description:
                attrs[sc.GEN_AI_AGENT_DESCRIPTION] = description
            self.input_key, self.output_key = sc.GEN_AI_INPUT_MESSAGES, sc.GEN_AI_OUTPUT_MESSAGES
        elif kind == _TOOL:
            self.span_name = f"{sc.OP_EXECUTE_TOOL} {self.name}"
            self.span_kind = SpanKind.INTERNAL
            attrs[sc.GEN_AI_OPERATION_NAME] = sc.OP_EXECUTE_TOOL
            attrs[sc.GEN_AI_TOOL_NAME] = self.name
            attrs[sc.GEN_AI_TOOL_TYPE] = "function"
            if description:
                attrs[sc.GEN_AI_TOOL_DESCRIPTION] = description
            self.input_key, self.output_key = (
                sc.GEN_AI_TOOL_CALL_ARGUMENTS,
                sc.GEN_AI_TOOL_CALL_RESULT,
            )
        elif kind == _LLM:
            self.span_name = f"{sc.OP_CHAT} {model}" if model else sc.OP_CHAT
            self.span_kind = SpanKind.CLIENT
            attrs[sc.GEN_AI_OPERATION_NAME] = sc.OP_CHAT
            if model:
                attrs[sc.GEN_AI_REQUEST_MODEL] = model
            if provider:
                attrs[sc.GEN_AI_PROVIDER_NAME] = provider
            self.input_key, self.output_key = sc.GEN_AI_INPUT_MESSAGES, sc.GEN_AI_OUTPUT_MESSAGES
        else:
            self.span_name = self.name
            self.span_kind = SpanKind.INTERNAL
            attrs[sc.GEN_AI_OPERATION_NAME] = sc.OP_WORKFLOW
            self.input_key, self.output_key = sc.TS_INPUT, sc.TS_OUTPUT
        self.conversation_id = conversation_id
        if isinstance(conversation_id, str):
            attrs[sc.GEN_AI_CONVERSATION_ID] = conversation_id
        self.attrs = attrs
        self.public_attrs = MappingProxyType(attrs)
        self.needs_value = callable(conversation_id) or callable(ground_truth)

    # -- content ------------------------------------------------------------------------------

    def input_text(
        self, instance: Any, args: Any, kwargs: Any, value: Any, s: ContentSettings
    ) -> str:
        if self.kind == _TOOL:
            return serialize(self.binder.arguments(instance, args, kwargs), s)
        if self.kind == _SPAN:
            return serialize(value, s)
        return input_messages_attr(value, s)

    def output_text(self, result: Any, s: ContentSettings) -> str:
        if self.kind in (_TOOL, _SPAN):
            return serialize(result, s)
        return output_messages_attr(result, s)

    # -- lifecycle ----------------------------------------------------------------------------

    def open(
        self, ctx: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> _Call | None:
        """Start the span (not yet current) under `ctx`; None when no span should be made."""
        try:
            settings = content_settings()
            capture = self.capture if self.capture is not None else settings.capture
            value = (
                self.binder.value(instance, args, kwargs) if capture or self.needs_value else _UNSET
            )
            attrs = self.attrs
            name = self.span_name
            conversation_id = self.conversation_id
            if callable(conversation_id) or self.model_from_call:
                attrs = dict(attrs)
                if callable(conversation_id):
                    conversation_id = _call_guarded(conversation_id, value)
                    if conversation_id is not None:
                        conversation_id = cap_name(str(conversation_id))
                        attrs[sc.GEN_AI_CONVERSATION_ID] = conversation_id
                if self.model_from_call:
                    model = self.binder.find("model", instance, args, kwargs)
                    if isinstance(model, str) and model:
                        model = cap_name(model)
                        attrs[sc.GEN_AI_REQUEST_MODEL] = model
                        name = f"{sc.OP_CHAT} {model}"
            otel_span = _tracer().start_span(name, ctx, self.span_kind, attrs)
        except Exception:  # noqa: BLE001 - no span rather than a broken call
            _log_once("open", "tracescore: could not start a span; calling through")
            return None
        recording = otel_span.is_recording()
        # unsampled calls are never handed off; the listeners' filters decide the rest, now
        listeners = _calls.agent_call_listeners(otel_span) if self.is_agent and recording else ()
        if listeners and value is _UNSET:
            try:
                value = self.binder.value(instance, args, kwargs)
            except Exception:  # noqa: BLE001 - the call runs, just not handed to listeners
                _log_once("bind", "tracescore: could not read an agent call's input")
                listeners = ()
        call = _Call(self, otel_span, ctx, value, capture and recording, settings)
        if self.kind == _TOOL and recording and not capture and _calls.following():
            try:  # not exported: for the scorers of the agent call it runs in
                call.unexported = {
                    self.input_key: self.input_text(instance, args, kwargs, value, settings)}
            except Exception:  # noqa: BLE001 - scored without the arguments
                _log_once("input", "tracescore: could not capture a call input")
        if self.is_agent and settings.openinference and recording:
            otel_span.set_attribute(sc.OI_SPAN_KIND, sc.OI_SPAN_KIND_AGENT)
        if call.capture:
            try:
                otel_span.set_attribute(
                    self.input_key, self.input_text(instance, args, kwargs, value, settings)
                )
                if self.is_agent and settings.openinference:
                    otel_span.set_attributes(_openinference.input_attributes(value, settings))
            except Exception:  # noqa: BLE001 - the call runs without its input captured
                _log_once("input", "tracescore: could not capture a call input")
        if listeners:
            call.listening = listeners
            call.conversation_id = conversation_id if isinstance(conversation_id, str) else None
            call.attributes = (
                MappingProxyType(attrs) if attrs is not self.attrs else self.public_attrs
            )
        return call


def _call_guarded(fn: Callable[[Any], Any], value: Any) -> Any:
    try:
        return fn(value)
    except Exception:  # noqa: BLE001 - a failing user callback only loses the attribute
        _log_once("callback", "tracescore: a decorator callback raised; ignoring it")
        return None


class _Call:
    """One running decorated call: its span, captured input and ground-truth slot.

    Every wrapper drives it the same way: `enter()` / `leave(token)` around each piece of the
    user's code (the whole call, or one generator step), then `finish` once.
    """

    __slots__ = (
        "_gt",
        "added_context",
        "attributes",
        "capture",
        "conversation_id",
        "ground_truth",
        "items",
        "listening",
        "op",
        "settings",
        "span",
        "step_ctx",
        "tool_content",
        "unexported",
        "value",
    )

    def __init__(
        self, op: _Op, otel_span: Any, ctx: Any, value: Any, capture: bool, s: ContentSettings
    ) -> None:
        self.op = op
        self.span = otel_span
        self.step_ctx = _set_span_in_context(otel_span, ctx)
        self.value = value
        self.capture = capture
        self.settings = s
        self.listening: tuple[Any, ...] = ()  # the listeners that want this call
        self.conversation_id: str | None = None
        self.attributes: Mapping[str, Any] = op.public_attrs
        self.ground_truth: Any = None
        self._gt: Any = None
        self.added_context: tuple[tuple[int, str], ...] = ()
        self.tool_content: dict[int, dict[str, str]] | None = None
        # a tool's content under capture off, for in-process scorers only (never exported)
        self.unexported: dict[str, str] | None = None

    def enter(self) -> Any:
        """Make the span current (and open the ground-truth slot when somebody listens)."""
        token = _attach(self.step_ctx)
        if self.listening:
            try:
                self._gt = _calls.enter_call()
            except Exception:  # noqa: BLE001 - no ground-truth slot rather than a broken call
                self._gt = None
        return token

    def leave(self, token: Any) -> None:
        """Undo `enter`: keep the ground truth set meanwhile, restore the context."""
        gt = self._gt
        if gt is not None:
            self._gt = None
            try:
                value = _calls.exit_call(*gt)
            except Exception:  # noqa: BLE001 - no ground truth rather than a broken call
                value = None
            if value is not None:
                self.ground_truth = value
            added = gt[1].context
            if added:
                self.added_context += tuple(added)
            tools = gt[1].tools
            if tools:
                if self.tool_content is None:
                    self.tool_content = {}
                self.tool_content.update(tools)
        _detach(token)

    def fail(self, token: Any, error: BaseException) -> None:
        """The user's code raised `error` (after `enter`): leave and finish with it."""
        self.leave(token)
        self.finish(None, error)

    def done(self, token: Any, result: Any) -> None:
        """The user's code returned `result` (after `enter`): leave and finish with it."""
        self.leave(token)
        self.finish(result, None)

    # -- generators: the output is the items they yield

    def start_stream(self) -> list[Any] | None:
        """The list that collects the yielded items, when the output is needed."""
        items: list[Any] | None = [] if self.capture or self.listening or self.op.is_llm else None
        self.items = items
        return items

    def stream_output(self, result: Any = None) -> Any:
        items = self.items
        return result if items is None else _join_items(items, self.op.kind)

    def finish(self, result: Any, error: BaseException | None) -> None:
        """Record the outcome, notify listeners and end the span. Never raises."""
        otel_span = self.span
        try:
            if error is not None:
                record_error(otel_span, error, settings=self.settings)
            else:
                if self.capture:
                    otel_span.set_attribute(
                        self.op.output_key, self.op.output_text(result, self.settings)
                    )
                    if self.op.is_agent and self.settings.openinference:
                        otel_span.set_attributes(
                            _openinference.output_attributes(result, self.settings)
                        )
                if self.op.is_llm and otel_span.is_recording():
                    _llm_result_attrs(otel_span, result)
            unexported = self.unexported
            if unexported is not None:
                if error is None:
                    unexported[self.op.output_key] = self.op.output_text(result, self.settings)
                _calls.add_tool_content(otel_span.get_span_context().span_id, unexported)
            if self.listening:
                self._notify(result, error)
        except Exception:  # noqa: BLE001 - telemetry never raises into the user's code
            _log_once("finish", "tracescore: could not record a call result")
        finally:
            try:
                otel_span.end()
            except Exception:  # noqa: BLE001 - telemetry never raises into the user's code
                _log_once("end", "tracescore: could not end a span")

    def _notify(self, result: Any, error: BaseException | None) -> None:
        gt = self.ground_truth
        if gt is None:
            default = self.op.ground_truth
            if callable(default):
                gt = _call_guarded(default, self.value)
            elif default is not _UNSET:
                gt = default
        _calls.notify_agent_call(
            _calls.AgentCall(
                span=self.span,
                name=self.op.name,
                input=self.value,
                output=None if error is not None else result,
                error=error,
                ground_truth=gt,
                conversation_id=self.conversation_id,
                attributes=self.attributes,
                context=self.added_context,
                tool_content=self.tool_content or {},
            ),
            self.listening,
        )


# --- wrappers (one per function flavour) -----------------------------------------------------


def _sync_wrapper(op: _Op) -> Callable[..., Any]:
    def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        ctx = _get_current()
        if ctx.get(_SUPPRESS_KEY):
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
        if ctx.get(_SUPPRESS_KEY):
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


# --- public decorators -----------------------------------------------------------------------


_PRIMITIVES = (str, bool, int, float)


def _is_attribute_value(value: Any) -> bool:
    """Whether `value` is a valid OpenTelemetry attribute value (primitive or homogeneous list)."""
    if isinstance(value, _PRIMITIVES):
        return True
    if not isinstance(value, (list, tuple)):
        return False
    kinds = {bool if isinstance(v, bool) else type(v) for v in value}
    return len(kinds) <= 1 and all(isinstance(v, _PRIMITIVES) for v in value)


def _validate(
    name: Any,
    capture_content: Any,
    attributes: Any,
    conversation_id: Any,
    model: Any,
    provider: Any,
    description: Any,
) -> None:
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise ConfigurationError(f"name must be a non-empty string, got {name!r}")
    if capture_content is not None and not isinstance(capture_content, bool):
        raise ConfigurationError(
            f"capture_content must be True, False or None, got {capture_content!r}"
        )
    if attributes is not None and (
        not isinstance(attributes, Mapping) or not all(isinstance(k, str) for k in attributes)
    ):
        raise ConfigurationError(f"attributes must be a mapping with str keys, got {attributes!r}")
    for key, value in (attributes or {}).items():
        if not _is_attribute_value(value):
            raise ConfigurationError(
                f"attributes[{key!r}] must be a str, bool, int or float, or a list of one of "
                f"those types (an OpenTelemetry attribute value), got {value!r}"
            )
    if conversation_id is not None and not (
        isinstance(conversation_id, str) or callable(conversation_id)
    ):
        raise ConfigurationError(
            f"conversation_id must be a string or a callable(input) -> str, got {conversation_id!r}"
        )
    for label, value in (("model", model), ("provider", provider), ("description", description)):
        if value is not None and not isinstance(value, str):
            raise ConfigurationError(f"{label} must be a string, got {value!r}")


def _unwrap_descriptor(fn: Any) -> Any:
    """The plain function inside a classmethod/staticmethod object (or `fn` itself)."""
    return fn.__func__ if isinstance(fn, (classmethod, staticmethod)) else fn


def _decorate(kind: str, fn: Any, options: dict[str, Any]) -> Any:
    if not callable(fn) and not isinstance(fn, (classmethod, staticmethod)):
        raise ConfigurationError(f"@{kind} decorates a function or method, got {fn!r}")
    target = _unwrap_descriptor(fn)
    op = _Op(kind, target, **options)
    plain = inspect.unwrap(target) if callable(target) else target
    if not (inspect.isfunction(plain) or inspect.ismethod(plain)) and callable(plain):
        call_method = inspect.getattr_static(type(plain), "__call__", None)  # a callable object
        if inspect.isfunction(call_method):
            plain = call_method
    if inspect.isasyncgenfunction(plain):
        wrapper = _async_generator_wrapper(op)
    elif inspect.iscoroutinefunction(plain):
        wrapper = _async_wrapper(op)
    elif inspect.isgeneratorfunction(plain):
        wrapper = _generator_wrapper(op)
    else:
        wrapper = _sync_wrapper(op)
    return wrapt.FunctionWrapper(fn, wrapper)


class _CommonOptions(TypedDict, total=False):
    name: str | None
    capture_content: bool | None
    attributes: Mapping[str, Any] | None
    conversation_id: str | Callable[[Any], str | None] | None


class _SpanOptions(_CommonOptions, total=False):
    pass


class _ToolOptions(_CommonOptions, total=False):
    description: str | None


class _AgentOptions(_ToolOptions, total=False):
    ground_truth: Any


class _LlmOptions(_CommonOptions, total=False):
    model: str | None
    provider: str | None


_OPTIONS = {
    kind: frozenset(options.__annotations__)
    for kind, options in (
        (_AGENT, _AgentOptions),
        (_TOOL, _ToolOptions),
        (_LLM, _LlmOptions),
        (_SPAN, _SpanOptions),
    )
}


def _decorator(kind: str, fn: Any, options: dict[str, Any]) -> Any:
    unknown = sorted(set(options) - _OPTIONS[kind])
    if unknown:
        raise TypeError(f"{kind}() got an unexpected keyword argument {unknown[0]!r}")
    if fn is None:
        _validate(
            options.get("name"),
            options.get("capture_content"),
            options.get("attributes"),
            options.get("conversation_id"),
            options.get("model"),
            options.get("provider"),
            options.get("description"),
        )
        return lambda f: _decorate(kind, f, options)
    return _decorate(kind, fn, options)


# Each decorator works bare (`@agent`) or with keyword options (`@agent(name="x")`); the
# options of each are typed by the TypedDicts above.


@overload
def agent(fn: F, /) -> F: ...
@overload
def agent(fn: None = None, /, **options: Unpack[_AgentOptions]) -> Callable[[F], F]: ...
def agent(fn: Any = None, /, **options: Any) -> Any:
    """Trace each call as an agent invocation: span `invoke_agent {name}` (INTERNAL).

    Records `gen_ai.agent.name`, the input/output as `gen_ai.input.messages` /
    `gen_ai.output.messages` (under content capture), and hands the finished call to online
    scoring. Options: `name`, `description`, `capture_content`, `attributes`,
    `conversation_id` (a string or `callable(input)`), `ground_truth` (the expected answer: a
    constant or a `callable(input)`; `tracescore.set_ground_truth()` inside the call wins
    over it).
    """
    return _decorator(_AGENT, fn, options)


@overload
def tool(fn: F, /) -> F: ...
@overload
def tool(fn: None = None, /, **options: Unpack[_ToolOptions]) -> Callable[[F], F]: ...
def tool(fn: Any = None, /, **options: Any) -> Any:
    """Trace each call as a tool execution: span `execute_tool {name}` (INTERNAL).

    Records `gen_ai.tool.name` and, under content capture, the arguments (JSON object by
    parameter name) as `gen_ai.tool.call.arguments` and the return value as
    `gen_ai.tool.call.result`. Options: `name`, `description`, `capture_content`,
    `attributes`, `conversation_id`.
    """
    return _decorator(_TOOL, fn, options)


@overload
def llm(fn: F, /) -> F: ...
@overload
def llm(fn: None = None, /, **options: Unpack[_LlmOptions]) -> Callable[[F], F]: ...
def llm(fn: Any = None, /, **options: Any) -> Any:
    """Trace each call as an LLM chat call: span `chat {model}` (CLIENT).

    `model` defaults to the call's `model` argument (by keyword or position). Records
    `gen_ai.request.model`, `gen_ai.provider.name`, messages under content capture, and token
    usage / response model / finish reasons when the function returns an OpenAI- or
    litellm-like response (object or dict). Options: `model`, `provider`, `name`,
    `capture_content`, `attributes`, `conversation_id`.
    """
    return _decorator(_LLM, fn, options)


@overload
def span(fn: F, /) -> F: ...
@overload
def span(fn: None = None, /, **options: Unpack[_SpanOptions]) -> Callable[[F], F]: ...
def span(fn: Any = None, /, **options: Any) -> Any:
    """Trace each call as a generic step: span `{name}` (INTERNAL, operation `workflow`).

    Under content capture the input and output go to `tracescore.input` / `tracescore.output`.
    Options: `name`, `capture_content`, `attributes`, `conversation_id`.
    """
    return _decorator(_SPAN, fn, options)
