"""Flush on SIGTERM: what is batched or held for scoring is exported before a container stop ends the
process, then the signal does what it did before (the application's handler, or the default: exit).

Installed by configure() from the main thread (option `flush_on_sigterm`, env
TRACESCORE_FLUSH_ON_SIGTERM, default on). Not installed when SIGTERM is ignored or handled outside
Python. A handler the application installs after configure() replaces this one.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

_log = logging.getLogger(__name__)

# on_term(chained): chained=True when the application's handler runs next (flush only: the app may
# keep working while it drains), False when the default action ends the process next (shut down).
_on_term: Callable[[bool], None] | None = None
_previous: Any = signal.SIG_DFL
_installed = False
_handling = False


def install(on_term: Callable[[bool], None]) -> bool:
    """Handle SIGTERM with `on_term`, chaining the current handler. True if our handler is in place."""
    global _on_term, _previous, _installed
    _on_term = on_term
    if _installed:
        return _is_current()
    if threading.current_thread() is not threading.main_thread():
        _log.debug("tracescore: not in the main thread; SIGTERM is not handled by tracescore")
        return False
    current = signal.getsignal(signal.SIGTERM)
    if current is signal.SIG_IGN or current is None:  # ignored, or handled outside Python
        return False
    _previous = current
    signal.signal(signal.SIGTERM, _handle)
    _installed = True
    return True


def uninstall() -> None:
    """Give SIGTERM back to the handler that was there before, if ours is still the current one."""
    global _installed
    if not _installed or threading.current_thread() is not threading.main_thread():
        return
    if _is_current():
        signal.signal(signal.SIGTERM, _previous)
    _installed = False


def _is_current() -> bool:
    return signal.getsignal(signal.SIGTERM) is _handle


def _handle(signum: int, frame: FrameType | None) -> None:
    global _handling
    previous = _previous
    chained = callable(previous)
    if not _handling:  # a second SIGTERM while flushing skips the flush
        _handling = True
        try:
            if _on_term is not None:
                _on_term(chained)
        except Exception:  # noqa: BLE001 - the signal must still do what it did before
            _log.exception("tracescore: flush on SIGTERM failed")
        finally:
            _handling = False
    if chained:
        previous(signum, frame)
        return
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the default action, as if we were never here
    os.kill(os.getpid(), signal.SIGTERM)
