"""litellm access shared by the judge, the CLI and the middleware: a lazy import and banner control.

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
import os
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

_QUIET: ContextVar[bool] = ContextVar("tracescore_quiet_litellm", default=False)
_PRINTING_MODULES = ("litellm.litellm_core_utils.exception_mapping_utils",
                     "litellm.litellm_core_utils.get_llm_provider_logic")
_installed = False  # the context-aware print is in place


def import_litellm() -> Any:
    """Import litellm (it is heavy: never at `import tracescore`) with the local price map."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    return litellm


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
