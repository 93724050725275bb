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
import threading
from collections import Counter
from collections.abc import Callable
from functools import wraps
from types import TracebackType
from typing import Any, ParamSpec, TypeVar

_P = ParamSpec("_P")
_R = TypeVar("_R")


class Guard:
    """Counts failures by site and logs each site's first one (thread-safe)."""

    def __init__(self, logger: logging.Logger | str = "tracescore") -> None:
        self.log = logging.getLogger(logger) if isinstance(logger, str) else logger
        self.counts: Counter[str] = Counter()
        self._logged: set[str] = set()
        self._lock = threading.Lock()

    def once(self, site: str, message: str, *args: object, exc_info: Any = False,
             level: int = logging.WARNING) -> bool:
        """Count one failure at `site`; log `message` % `args` the first time only. True when
        it was logged now."""
        with self._lock:
            self.counts[site] += 1
            if site in self._logged:
                return False
            self._logged.add(site)
        self.log.log(level, message, *args, exc_info=exc_info)
        return True

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
        """Forget what was logged and counted (a forked child starts afresh)."""
        with self._lock:
            self.counts.clear()
            self._logged.clear()
        self._lock = threading.Lock()


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


GUARD = Guard("tracescore")  # for module-level code; objects that want their own "once" own one
