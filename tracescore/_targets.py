"""Import what a `module:attr` or `file.py:attr` spec names (the CLI's target, the gateway's
scorers given by import path)."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

from tracescore._exceptions import SetupError

__all__ = ["SetupError", "load_target"]


def load_target(spec: str) -> Any:
    """Import `module:attr` or `path/to/file.py:attr` (attr may be dotted, e.g. `Agent.run`)."""
    module_part, sep, attr_path = spec.rpartition(":")
    if not sep or not module_part or not attr_path:
        raise SetupError(f"bad target {spec!r}; write it as module:function or file.py:function")
    module = _import(module_part, spec)
    obj: Any = module
    for part in attr_path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise SetupError(f"cannot find {attr_path!r} in {module_part!r} "
                             f"(target {spec!r})") from None
    if not callable(obj) and not any(callable(getattr(obj, m, None))
                                     for m in ("ainvoke", "arun", "invoke", "run")):
        raise SetupError(f"target {spec!r} is not callable")
    return obj


def _import(module_part: str, spec: str) -> Any:
    path = Path(module_part)
    try:
        if module_part.endswith(".py") or path.is_file():
            if not path.is_file():
                raise SetupError(f"cannot import target {spec!r}: {path} does not exist")
            name = f"_tracescore_target_{path.stem}"
            loader_spec = importlib.util.spec_from_file_location(name, path)
            if loader_spec is None or loader_spec.loader is None:
                raise SetupError(f"cannot import target {spec!r}: not a Python file")
            module = importlib.util.module_from_spec(loader_spec)
            sys.modules[name] = module
            sys.path.insert(0, str(path.resolve().parent))  # its sibling imports work
            loader_spec.loader.exec_module(module)
            return module
        if "" not in sys.path and os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())  # `module:function` resolves from where you run it
        return importlib.import_module(module_part)
    except SetupError:
        raise
    except Exception as exc:  # noqa: BLE001 - any import-time failure is the user's to fix
        raise SetupError(f"cannot import target {spec!r}: {type(exc).__name__}: {exc}") from None
