"""Instrument an existing agent object or class without editing it: wrap one method with `@agent`."""

from __future__ import annotations

import inspect
import threading
from typing import Any, TypeVar

from tracescore._exceptions import ConfigurationError

__all__ = ["instrument_agent", "uninstrument_agent"]

T = TypeVar("T")
_PATCHES = "__tracescore_agent_patches__"  # {method: (had_own_attribute, original)} in the target's __dict__
_lock = threading.Lock()


def instrument_agent(obj_or_class: T, method: str = "run", *, name: str | None = None,
                     **agent_options: Any) -> T:
    """Trace `method` of an agent object (this instance only) or class (all its instances) as an
    `invoke_agent {name}` span, like decorating it with `@tracescore.agent`.

    `name` defaults to the class name; `agent_options` are the options of `@tracescore.agent`
    (e.g. capture_content, conversation_id, attributes). Sync, async and generator methods work.
    Idempotent per target and method; undo with `uninstrument_agent`. Returns the target.
    """
    from tracescore.instrument._decorators import agent

    target: Any = obj_or_class
    is_class = isinstance(target, type)
    if not isinstance(method, str) or not method.isidentifier():
        raise ConfigurationError(f"method must be a method name, got {method!r}")
    if not hasattr(target, "__dict__"):
        raise ConfigurationError(f"cannot instrument {type(target).__name__}: it has no __dict__")
    if is_class:
        try:
            original = inspect.getattr_static(target, method)
        except AttributeError:
            raise ConfigurationError(f"{target.__name__} has no method {method!r}") from None
        if not callable(getattr(target, method)):
            raise ConfigurationError(f"{target.__name__}.{method} is not callable")
        agent_name = name or target.__name__
    else:
        original = _unpatched(target, method)
        if not callable(original):
            raise ConfigurationError(
                f"{type(target).__name__} object has no callable method {method!r}")
        agent_name = name or type(target).__name__

    with _lock:
        patches = vars(target).get(_PATCHES)
        if patches is not None and method in patches:
            return obj_or_class
        wrapped = agent(name=agent_name, **agent_options)(original)
        had_own = method in vars(target)
        own_value = vars(target)[method] if had_own else None
        if patches is None:
            patches = {}
            _set(target, _PATCHES, patches)
        patches[method] = (had_own, own_value)
        _set(target, method, wrapped)
    return obj_or_class


def uninstrument_agent(obj_or_class: Any, method: str = "run") -> None:
    """Undo `instrument_agent(obj_or_class, method)`; no-op if it was not instrumented."""
    target: Any = obj_or_class
    with _lock:
        patches = vars(target).get(_PATCHES) if hasattr(target, "__dict__") else None
        if not patches or method not in patches:
            return
        had_own, own_value = patches.pop(method)
        if had_own:
            _set(target, method, own_value)
        else:
            _delete(target, method)
        if not patches:
            _delete(target, _PATCHES)


def _unpatched(obj: Any, method: str) -> Any:
    """`obj.method`, but past a class-level `instrument_agent` patch: an instance of an
    instrumented class then gets one agent span (with the instance's options), not two."""
    if method not in vars(obj):
        inherited = False  # passed a patch of a method its class had inherited
        for klass in type(obj).__mro__:
            if method not in vars(klass):
                continue
            patches = vars(klass).get(_PATCHES) or {}
            if method in patches:
                had_own, own_value = patches[method]
                if had_own:
                    return _bind(own_value, obj)
                inherited = True
            elif inherited:
                return _bind(vars(klass)[method], obj)
            else:
                break
    return getattr(obj, method, None)


def _bind(value: Any, obj: Any) -> Any:
    get = getattr(type(value), "__get__", None)
    return get(value, obj, type(obj)) if get is not None else value


def _set(target: Any, key: str, value: Any) -> None:
    # object.__setattr__ also works on frozen dataclasses and models that guard __setattr__
    if isinstance(target, type):
        setattr(target, key, value)
    else:
        object.__setattr__(target, key, value)


def _delete(target: Any, key: str) -> None:
    if isinstance(target, type):
        delattr(target, key)
    else:
        object.__delattr__(target, key)
