"""litellm access shared by the judge, the CLI and the middleware: a lazy import, banner control,
and fork safety.

On provider errors litellm prints help banners to stdout ("Give Feedback / Get Help",
"Provider List"). Its only switch is the process-wide `litellm.suppress_debug_info`, which would
also silence the user's own calls. Instead, the modules that print get a `print` that drops output
while `quiet_litellm()` is active in the calling context (thread or task) and prints as before
everywhere else, so the user's calls and settings are untouched.
"""

from __future__ import annotations

import builtins
import contextlib
import importlib
import logging
import os
import sys
import threading
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

_QUIET: ContextVar[bool] = ContextVar("tracescore_quiet_litellm", default=False)
_PRINTING_MODULES = ("litellm.litellm_core_utils.exception_mapping_utils",
                     "litellm.litellm_core_utils.get_llm_provider_logic")
_installed = False  # the context-aware print is in place


def import_litellm() -> Any:
    """Import litellm (it is heavy: never at `import tracescore`) with the local price map.

    Called on every judge call: once litellm is loaded, it is returned at once."""
    litellm = sys.modules.get("litellm")
    if litellm is not None and not _initializing(litellm):
        return litellm
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    return litellm


def _initializing(module: Any) -> bool:
    """True while `module` is still being imported (by another thread, say)."""
    return bool(getattr(getattr(module, "__spec__", None), "_initializing", False))


def _context_print(*args: Any, **kwargs: Any) -> None:
    if not _QUIET.get():
        builtins.print(*args, **kwargs)


def _install_context_print() -> None:
    global _installed
    if _installed:
        return
    for name in _PRINTING_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:  # another litellm layout: its banners stay
            continue
        if "print" not in vars(module):  # never replace a `print` someone else put there
            module.print = _context_print  # type: ignore[attr-defined]
    _installed = True


@contextlib.contextmanager
def quiet_litellm() -> Iterator[None]:
    """Silence litellm's stdout banners for calls made inside the block (this context only)."""
    import_litellm()
    _install_context_print()
    token = _QUIET.set(True)
    try:
        yield
    finally:
        _QUIET.reset(token)


# --- fork safety -----------------------------------------------------------------------------
# litellm caches its HTTP clients (and their pooled connections, registered with the parent's
# event loop) process-wide, and closes them at exit. In a forked child those are the parent's:
# using them shares its sockets, and closing them unregisters the sockets from the epoll
# instance the child shares with the parent, whose next judge call then hangs. So a child
# forgets them, unused and unclosed, and builds its own.
_parent_clients: list[Any] = []  # kept from the child's garbage collector and exit cleanup


def _forget_parent_clients() -> None:
    litellm: Any = sys.modules.get("litellm")
    if litellm is None:
        return
    try:
        cache = getattr(litellm, "in_memory_llm_clients_cache", None)
        if cache is not None and getattr(cache, "cache_dict", None):
            _parent_clients.append((cache.cache_dict, getattr(cache, "ttl_dict", None)))
            cache.cache_dict, cache.ttl_dict = {}, {}
            if hasattr(cache, "expiration_heap"):
                cache.expiration_heap = []
            for lock in ("_increment_lock", "_write_lock"):  # a parent thread may have held them
                if hasattr(cache, lock):
                    setattr(cache, lock, threading.Lock())
        main: Any = sys.modules.get("litellm.main")
        handler = getattr(main, "base_llm_aiohttp_handler", None)
        if handler is not None and getattr(handler, "client_session", None) is not None:
            _parent_clients.append(handler)
            fresh = type(handler)()
            holders: tuple[Any, ...] = (main, litellm)  # modules (or None) that hold the handler
            for module in holders:
                if getattr(module, "base_llm_aiohttp_handler", None) is handler:
                    module.base_llm_aiohttp_handler = fresh
    except Exception:  # another litellm layout: the child keeps litellm's state
        logging.getLogger("tracescore").debug("tracescore: could not reset litellm's clients "
                                              "after fork", exc_info=True)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_parent_clients)
