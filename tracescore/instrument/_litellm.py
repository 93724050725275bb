"""litellm middleware: a `chat {model}` CLIENT span around litellm.completion / litellm.acompletion.

Patches the `litellm` module attributes, so code that looks them up at call time (`litellm.completion(...)`)
is traced. A reference taken before instrumenting (`from litellm import completion`) keeps the original.
Streaming results are wrapped so the span covers the iteration. Telemetry errors are logged, never raised.
What a call reads as on its span (provider, server, cost, messages) is in `_litellm_read`.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import wrapt
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind

from tracescore import _semconv as sc
from tracescore._content import cap_name
from tracescore._guard import Guard
from tracescore._suppress import is_suppressed
from tracescore._version import __version__
from tracescore.instrument._errors import record_error
from tracescore.instrument._litellm_read import (
    _get,
    _input_messages,
    _is_stream,
    _model_and_provider,
    _output_message,
    _response_cost,
    _server,
    _set_if,
)

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["instrument_litellm", "uninstrument_litellm"]

_log = logging.getLogger(__name__)
_PATCHED = ("completion", "acompletion")
_lock = threading.Lock()
_originals: dict[str, Any] = {}
_guard = Guard(_log, traceback=True)  # logs each failing site once

_REQUEST_PARAMS = (("temperature", sc.GEN_AI_REQUEST_TEMPERATURE), ("top_p", sc.GEN_AI_REQUEST_TOP_P),
                   ("max_tokens", sc.GEN_AI_REQUEST_MAX_TOKENS),
                   ("max_completion_tokens", sc.GEN_AI_REQUEST_MAX_TOKENS))


def instrument_litellm() -> None:
    """Trace litellm.completion and litellm.acompletion (streaming included). Idempotent."""
    import litellm

    with _lock:
        if _originals:
            return
        for name in _PATCHED:
            _originals[name] = getattr(litellm, name)
        wrapt.wrap_function_wrapper(litellm, "completion", _wrap_sync)
        wrapt.wrap_function_wrapper(litellm, "acompletion", _wrap_async)


def uninstrument_litellm() -> None:
    """Undo instrument_litellm(). Idempotent."""
    with _lock:
        if not _originals:
            return
        import litellm

        for name in _PATCHED:
            current = getattr(litellm, name, None)
            if isinstance(current, wrapt.FunctionWrapper) and current.__wrapped__ is _originals[name]:
                setattr(litellm, name, _originals[name])
            else:
                _log.warning("tracescore: litellm.%s was re-patched by someone else; left as is", name)
        _originals.clear()


def _tracer() -> trace.Tracer:
    return trace.get_tracer("tracescore", __version__)


def _wrap_sync(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    if is_suppressed():
        return wrapped(*args, **kwargs)
    call = _ChatCall.begin(args, kwargs)
    if call is None:
        return wrapped(*args, **kwargs)
    try:
        with trace.use_span(call.span, end_on_exit=False, record_exception=False,
                            set_status_on_exception=False):
            result = wrapped(*args, **kwargs)
    except BaseException as exc:
        call.end(error=exc)
        raise
    return call.complete(result)


async def _wrap_async(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    if is_suppressed():
        return await wrapped(*args, **kwargs)
    call = _ChatCall.begin(args, kwargs)
    if call is None:
        return await wrapped(*args, **kwargs)
    try:
        with trace.use_span(call.span, end_on_exit=False, record_exception=False,
                            set_status_on_exception=False):
            result = await wrapped(*args, **kwargs)
    except BaseException as exc:
        call.end(error=exc)
        raise
    return call.complete(result)



class _ChatCall:
    """One traced chat call: starts the span, records the response or error, ends exactly once."""

    def __init__(self, span: Span, model: str, provider: str | None, capture: bool) -> None:
        self.span = span
        self.model = model
        self.provider = provider
        self.capture = capture
        self._ended = False
        self._end_lock = threading.Lock()

    @classmethod
    def begin(cls, args: tuple, kwargs: dict) -> _ChatCall | None:
        try:
            from tracescore._content import capture_enabled

            model = str(kwargs.get("model", args[0] if args else "") or "")
            messages = kwargs.get("messages", args[1] if len(args) > 1 else None)
            request_model, provider = _model_and_provider(model, kwargs)
            shown = cap_name(request_model)
            attributes: dict[str, Any] = {sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT,
                                          sc.GEN_AI_REQUEST_MODEL: shown}
            if provider:
                attributes[sc.GEN_AI_PROVIDER_NAME] = cap_name(provider)
            for param, key in _REQUEST_PARAMS:
                value = kwargs.get(param)
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    attributes[key] = value
            attributes.update(_server(kwargs.get("api_base") or kwargs.get("base_url")))
            capture = capture_enabled()
            span = _tracer().start_span(f"{sc.OP_CHAT} {shown}".strip(), kind=SpanKind.CLIENT,
                                        attributes=attributes)
        except Exception:  # noqa: BLE001 - telemetry never breaks the call
            _guard.once("begin", "tracescore: could not start the litellm span; the call runs untraced")
            return None
        call = cls(span, request_model, provider, capture and span.is_recording())
        if call.capture and messages is not None:
            try:
                call._set_content(sc.GEN_AI_INPUT_MESSAGES, _input_messages(messages))
            except Exception:  # noqa: BLE001 - the call still runs, without input messages
                _guard.once("input", "tracescore: could not record the litellm input messages")
        return call

    def complete(self, result: Any) -> Any:
        """Record a finished response, or wrap a stream so the span follows its iteration."""
        try:
            if not self.span.is_recording():  # sampled out: nothing to record
                pass
            elif _is_stream(result):
                return _TracedStream(result, self)
            self._record_response(result)
        except Exception:  # noqa: BLE001 - telemetry never breaks the call
            _guard.once("response", "tracescore: could not read the litellm response for its span")
        self.end()
        return result

    def _record_response(self, response: Any) -> None:
        span = self.span
        _set_if(span, sc.GEN_AI_RESPONSE_ID, _get(response, "id"))
        _set_if(span, sc.GEN_AI_RESPONSE_MODEL, _get(response, "model"))
        choices = _get(response, "choices") or []
        reasons = [cap_name(str(r)) for r in (_get(c, "finish_reason") for c in choices) if r]
        if reasons:
            span.set_attribute(sc.GEN_AI_RESPONSE_FINISH_REASONS, reasons)
        usage = _get(response, "usage")
        self._record_usage(usage)
        cost = _response_cost(response, self.provider)
        if cost is None:
            cost = self._cost_from_usage(usage)
        _set_if(span, sc.TS_COST_USD, cost)
        if self.capture:
            outputs = [_output_message(_get(c, "message"), _get(c, "finish_reason")) for c in choices]
            self._set_content(sc.GEN_AI_OUTPUT_MESSAGES, outputs)

    def _record_usage(self, usage: Any) -> None:
        if usage is None or type(usage).__name__ == "UnreportedUsage":
            return
        for field, key in (("prompt_tokens", sc.GEN_AI_USAGE_INPUT_TOKENS),
                           ("completion_tokens", sc.GEN_AI_USAGE_OUTPUT_TOKENS)):
            value = _get(usage, field)
            if isinstance(value, int) and not isinstance(value, bool):
                self.span.set_attribute(key, value)

    def _cost_from_usage(self, usage: Any) -> float | None:
        prompt, completion = _get(usage, "prompt_tokens"), _get(usage, "completion_tokens")
        if not isinstance(prompt, int) or not isinstance(completion, int):
            return None
        try:
            import litellm

            from tracescore._litellm_support import quiet_litellm

            with quiet_litellm():  # an unknown model: no banner on the user's stdout
                costs = litellm.cost_per_token(model=self.model, prompt_tokens=prompt,
                                               completion_tokens=completion,
                                               custom_llm_provider=self.provider)
            return float(sum(costs))
        except Exception:  # noqa: BLE001 - unknown model: no cost
            return None

    def _set_content(self, key: str, value: Any) -> None:
        from tracescore._content import serialize

        self.span.set_attribute(key, serialize(value))

    def end(self, error: BaseException | None = None) -> None:
        """End the span once; an error sets error.type, status ERROR and an exception event."""
        with self._end_lock:
            if self._ended:
                return
            self._ended = True
        try:
            if error is not None:
                record_error(self.span, error, type_name=type(error).__qualname__)
        except Exception:  # noqa: BLE001 - the span still ends
            _guard.once("error", "tracescore: could not record the litellm error on its span")
        self.span.end()


class _StreamState:
    """What a stream accumulates; kept apart from the proxy so a GC finalizer can end the span."""

    def __init__(self, call: _ChatCall) -> None:
        self.call = call
        self.response_id: str | None = None
        self.response_model: str | None = None
        self.finish: dict[int, str] = {}
        self.text: dict[int, list[str]] = {}
        self.text_len = 0
        self.tool_calls: dict[int, dict[int, dict[str, Any]]] = {}
        self.usage: Any = None
        self.last_chunk: Any = None

    def add(self, chunk: Any) -> None:
        try:
            self.last_chunk = chunk
            self.response_id = self.response_id or _get(chunk, "id")
            self.response_model = self.response_model or _get(chunk, "model")
            usage = _get(chunk, "usage")
            if usage is not None:
                self.usage = usage
            for choice in _get(chunk, "choices") or []:
                index = _get(choice, "index", 0) or 0
                if _get(choice, "finish_reason"):
                    self.finish[index] = str(_get(choice, "finish_reason"))
                if self.call.capture:
                    self._add_delta(index, _get(choice, "delta"))
        except Exception:  # noqa: BLE001 - the caller's stream must keep flowing
            _guard.once("chunk", "tracescore: could not read a litellm stream chunk for its span")

    def _add_delta(self, index: int, delta: Any) -> None:
        from tracescore._config import content_settings

        content = _get(delta, "content")
        if isinstance(content, str) and self.text_len <= content_settings().max_length:
            self.text.setdefault(index, []).append(content)  # bounded: serialize truncates anyway
            self.text_len += len(content)
        for tool_call in _get(delta, "tool_calls") or []:
            slot = self.tool_calls.setdefault(index, {}).setdefault(
                _get(tool_call, "index", 0) or 0, {"id": None, "name": None, "arguments": ""})
            function = _get(tool_call, "function")
            slot["id"] = slot["id"] or _get(tool_call, "id")
            slot["name"] = slot["name"] or _get(function, "name")
            slot["arguments"] += _get(function, "arguments") or ""

    def __enter__(self) -> None:
        """`with state:` wraps one read of a chunk from the stream."""

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        """A read that raises ends the span: exhausted (Stop[Async]Iteration) or failed (`exc`)."""
        if exc is not None:
            self.finish_span(None if isinstance(exc, StopIteration | StopAsyncIteration) else exc)

    def finish_span(self, error: BaseException | None = None) -> None:
        call = self.call
        if call._ended:
            return
        try:
            if error is None:
                hidden = getattr(self.last_chunk, "_hidden_params", None)
                usage = self.usage
                if usage is None and isinstance(hidden, Mapping):
                    usage = hidden.get("usage")
                response = {"id": self.response_id, "model": self.response_model, "usage": usage,
                            "choices": [{"finish_reason": self.finish.get(i),
                                         "message": self._message(i)}
                                        for i in sorted(set(self.finish) | set(self.text)
                                                        | set(self.tool_calls))]}
                call._record_response(response)
        except Exception:  # noqa: BLE001 - the span still ends
            _guard.once("stream", "tracescore: could not record the litellm stream on its span")
        call.end(error=error)

    def _message(self, index: int) -> dict[str, Any]:
        calls = [{"id": c["id"], "type": "function",
                  "function": {"name": c["name"], "arguments": c["arguments"]}}
                 for _, c in sorted(self.tool_calls.get(index, {}).items())]
        return {"role": "assistant", "content": "".join(self.text.get(index, [])) or None,
                "tool_calls": calls or None}


class _TracedStream(wrapt.ObjectProxy):
    """The caller's stream, unchanged, with the span ended on exhaustion, error, close or GC."""

    def __init__(self, stream: Any, call: _ChatCall) -> None:
        super().__init__(stream)
        self._self_state = _StreamState(call)
        weakref.finalize(self, self._self_state.finish_span)

    def __iter__(self) -> _TracedStream:
        return self

    def __next__(self) -> Any:
        with self._self_state:
            chunk = next(self.__wrapped__)
        self._self_state.add(chunk)
        return chunk

    def __aiter__(self) -> _TracedStream:
        return self

    async def __anext__(self) -> Any:
        with self._self_state:
            chunk = await self.__wrapped__.__anext__()
        self._self_state.add(chunk)
        return chunk

    def close(self) -> Any:
        try:
            return self.__wrapped__.close()
        finally:
            self._self_state.finish_span()

    async def aclose(self) -> Any:
        try:
            return await self.__wrapped__.aclose()
        finally:
            self._self_state.finish_span()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> Any:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> Any:
        await self.aclose()
