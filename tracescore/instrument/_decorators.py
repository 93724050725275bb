"""`@agent`, `@tool`, `@llm` and `@span`: decorators that turn calls into GenAI spans.

Built on wrapt, so methods, classmethods and staticmethods bind correctly and introspection
(`__wrapped__`, signature, docstring, `inspect.iscoroutinefunction` …) still sees the original.
The sync/async/generator/async-generator wrapper (`_wrappers`) is chosen once, at decoration
time, around an `_Op` (`_operation`: what the decorator knows of the function; `_binder` maps its
arguments, `_results` reads what it returned); `_options` checks the options.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, overload

import wrapt

from tracescore._exceptions import ConfigurationError
from tracescore.instrument._operation import _Op
from tracescore.instrument._options import (
    _AGENT,
    _LLM,
    _OPTIONS,
    _SPAN,
    _TOOL,
    _AgentOptions,
    _LlmOptions,
    _SpanOptions,
    _ToolOptions,
    _validate,
)
from tracescore.instrument._wrappers import (
    _async_generator_wrapper,
    _async_wrapper,
    _generator_wrapper,
    _sync_wrapper,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["agent", "llm", "span", "tool"]

F = TypeVar("F", bound=Callable[..., Any])

# --- public decorators -----------------------------------------------------------------------


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
    `conversation_id` (a string or `callable(input)`), `question_arg` (the parameter that holds
    the question when the function takes several; default: the one text argument that is no
    identifier, else the dict of all arguments), `ground_truth` (the expected answer: a
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
