"""`_Op` (what a decorator knows of its function, worked out once) and `_Call` (one running call:
its span, captured input, ground-truth slot): what every wrapper drives."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Tracer

from tracescore import _semconv as sc
from tracescore._config import ContentSettings, content_settings
from tracescore._content import cap_name, serialize
from tracescore._guard import Guard
from tracescore._version import __version__
from tracescore.instrument import _calls, _openinference
from tracescore.instrument._binder import _UNSET, _Binder
from tracescore.instrument._errors import record_error
from tracescore.instrument._options import _AGENT, _LLM, _SPAN, _TOOL, _validate
from tracescore.instrument._question import NO_DEFAULT, pick_question, question_default
from tracescore.instrument._results import _join_items, _llm_result_attrs
from tracescore.instrument._span_messages import (
    input_messages_attr,
    output_messages_attr,
)

_log = logging.getLogger("tracescore")

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


_guard = Guard(_log, traceback=True)  # logs each failing site once


# --- the operation a decorator describes -----------------------------------------------------

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
        "question_arg",
        "question_default",
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
        question_arg: str | None = None,
    ) -> None:
        _validate(name, capture_content, attributes, conversation_id, model, provider, description)
        self.question_arg = question_arg
        self.question_default = (NO_DEFAULT if question_arg is None
                                 else question_default(fn, question_arg))
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

    def question(self, value: Any, instance: Any, args: tuple[Any, ...]) -> Any:
        """An agent's input as recorded and scored: its question when it takes several
        arguments (`question_arg`, else the one text argument that is no id), else `value`."""
        if not self.is_agent or value is _UNSET or not isinstance(value, dict):
            return value
        if self.binder.takes_one(instance, args):
            return value  # the one argument is itself a dict
        return pick_question(value, self.question_arg, self.question_default)

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
            _guard.once("open", "tracescore: could not start a span; calling through")
            return None
        recording = otel_span.is_recording()
        # unsampled calls are never handed off; the listeners' filters decide the rest, now
        listeners = _calls.agent_call_listeners(otel_span) if self.is_agent and recording else ()
        if listeners and value is _UNSET:
            try:
                value = self.binder.value(instance, args, kwargs)
            except Exception:  # noqa: BLE001 - the call runs, just not handed to listeners
                _guard.once("bind", "tracescore: could not read an agent call's input")
                listeners = ()
        call = _Call(self, otel_span, ctx, value, capture and recording, settings)
        question = value
        if self.is_agent and value is not _UNSET:
            try:
                question = call.question = self.question(value, instance, args)
            except Exception:  # noqa: BLE001 - the call is recorded with all its arguments
                _guard.once("question", "tracescore: could not pick an agent call's question")
        if self.kind == _TOOL and recording and not capture and _calls.following():
            try:  # not exported: for the scorers of the agent call it runs in
                call.unexported = {
                    self.input_key: self.input_text(instance, args, kwargs, value, settings)}
            except Exception:  # noqa: BLE001 - scored without the arguments
                _guard.once("input", "tracescore: could not capture a call input")
        if self.is_agent and settings.openinference and recording:
            otel_span.set_attribute(sc.OI_SPAN_KIND, sc.OI_SPAN_KIND_AGENT)
        if call.capture:
            try:
                otel_span.set_attribute(
                    self.input_key, self.input_text(instance, args, kwargs, question, settings)
                )
                if self.is_agent and settings.openinference:
                    otel_span.set_attributes(_openinference.input_attributes(question, settings))
            except Exception:  # noqa: BLE001 - the call runs without its input captured
                _guard.once("input", "tracescore: could not capture a call input")
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
        _guard.once("callback", "tracescore: a decorator callback raised; ignoring it")
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
        "question",
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
        self.value = value  # what callbacks get (`conversation_id`, `ground_truth`)
        self.question = value  # what is recorded and scored (`_Op.question`)
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
            _guard.once("finish", "tracescore: could not record a call result")
        finally:
            try:
                otel_span.end()
            except Exception:  # noqa: BLE001 - telemetry never raises into the user's code
                _guard.once("end", "tracescore: could not end a span")

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
                input=self.question,
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
