"""How a decorated function's arguments map to names, worked out once at decoration time."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

_UNSET: Any = object()  # no value (an argument not given, a value not read)

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

    def takes_one(self, instance: Any, args: tuple[Any, ...]) -> bool:
        """Whether the function takes a single argument (its value is that argument)."""
        (_names, single), _args = self._resolve(instance, args)
        return single is not _UNSET

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
