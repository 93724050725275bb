"""One guard for "never break the app": telemetry code that may fail runs inside a site of a
`Guard`, which catches the failure, counts it by site, logs it once per site and never raises.

    guard = Guard("tracescore")
    reading = guard.site("trace_input", "tracescore: could not read a tool or context span")
    with reading:           # a failure inside is counted, logged the first time, swallowed
        item = read(span)

    guard.once("down", "tracescore: the next hop is failing (%s)", detail)  # no exception

A site is made once (at construction time) and entered on the hot path: entering costs two
method calls and no allocation. `counts` holds the failures by site. One guard per object that
wants its own "once" (a processor, a sink), or the module's `GUARD` for module-level helpers.
Never guards `BaseException`s that are not `Exception`s (KeyboardInterrupt, SystemExit).
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections import Counter
from collections.abc import Callable
from functools import wraps
from types import TracebackType
from typing import Any, ParamSpec, TypeVar

_P = ParamSpec("_P")
_R = TypeVar("_R")


class Guard:
    """Counts failures by site and logs each site's first one (thread-safe)."""

    def __init__(self, logger: logging.Logger | str = "tracescore", *,
                 traceback: bool = False) -> None:
        self.log = logging.getLogger(logger) if isinstance(logger, str) else logger
        self.traceback = traceback  # `once` logs the current exception's traceback by default
        self.counts: Counter[str] = Counter()
        self._logged: set[str] = set()
        self._lock = threading.Lock()
        _GUARDS.add(self)

    def once(self, site: str, message: str, *args: object, exc_info: Any = None,
             level: int = logging.WARNING) -> None:
        """Count one failure at `site`; log `message` % `args` the first time only (with the
        current exception's traceback when `exc_info`, default: the guard's `traceback`)."""
        if exc_info is None:
            exc_info = self.traceback
        with self._lock:
            self.counts[site] += 1
            if site in self._logged:
                return
            self._logged.add(site)
        self.log.log(level, message, *args, exc_info=exc_info)

    def site(self, site: str, message: str, *args: object) -> Site:
        """A reusable context manager: an `Exception` inside it is counted at `site`, logged
        (with its traceback) the first time, and swallowed."""
        return Site(self, site, message, args)

    def wrap(self, site: str, message: str, default: Any = None
             ) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
        """A decorator: the function's `Exception`s are counted at `site`, logged once and
        swallowed; it then returns `default`."""

        def decorate(function: Callable[_P, _R]) -> Callable[_P, _R]:
            @wraps(function)
            def guarded(*args: _P.args, **kwargs: _P.kwargs) -> _R:
                try:
                    return function(*args, **kwargs)
                except Exception:  # noqa: BLE001 - the guard's one broad except
                    self.once(site, message, exc_info=True)
                    return default

            return guarded

        return decorate

    def reset(self) -> None:
        """Forget what was logged and counted."""
        with self._lock:
            self.counts.clear()
            self._logged.clear()

    def _after_fork(self) -> None:
        self._lock = threading.Lock()  # a forked child may have copied it held


class Site:
    """One guarded place (see `Guard.site`)."""

    __slots__ = ("args", "guard", "message", "name")

    def __init__(self, guard: Guard, name: str, message: str, args: tuple[object, ...]) -> None:
        self.guard, self.name, self.message, self.args = guard, name, message, args

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> bool:
        if kind is None or not issubclass(kind, Exception):
            return False
        self.guard.once(self.name, self.message, *self.args, exc_info=(kind, error, traceback))
        return True


_GUARDS: weakref.WeakSet[Guard] = weakref.WeakSet()


def _renew_locks() -> None:
    for guard in list(_GUARDS):
        guard._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_renew_locks)

GUARD = Guard("tracescore")  # for module-level code; objects that want their own "once" own one
