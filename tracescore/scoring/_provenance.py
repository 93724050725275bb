"""Which scorer produced a result: its version, a hash of everything that decides its scores.

A scorer's version is `{release}+{12 hex digits}`, the digits a SHA-256 over its id, its class,
its options (the public attributes its constructor set: scale, thresholds, instructions, steps,
include, scope, ...), the tracescore release, its code (the source files of tracescore's scorers,
judges and prompts, and those of a scorer class of the user's own, so an edited prompt or rule
gives a new version before a new release does) and its judge: the model string and the judge
options that change the answers (temperature, seed, ...). Never a secret: attributes named like keys, tokens, headers or credentials, and the judge's
address, timeout and retries, stay out, so a rotated key or a longer timeout keeps the version.

A scorer computes it once (`Scorer.version`, cached on the object); a scorer that declares its own
`version` keeps it.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import inspect
import json
import math
import re
import sys
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypedDict

from tracescore._version import __version__

# names that never enter a version: secrets, and what only changes how long the judge is waited for
_NOT_OPTIONS = re.compile(r"api_?key|secret|passw|credential|auth|token$|headers?$|cookie"
                          r"|timeout|retries|retry|backoff", re.IGNORECASE)
# a scorer's attributes that are no option (the id and judge enter on their own)
_NOT_SCORER_OPTIONS = frozenset({"id", "name", "version", "judge", "model"})
# judge options that change what the judge answers (a LiteLLMJudge's litellm arguments)
_JUDGE_OPTIONS = ("temperature", "top_p", "top_k", "seed", "max_tokens", "max_completion_tokens",
                  "reasoning_effort", "thinking")
_MAX_DEPTH = 6
_cache: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


class Provenance(TypedDict, total=False):
    """Keywords of `evaluation_events`: which scorer produced a result."""

    scorer_version: str | None
    judge_model: str | None


def provenance(scorer: Any) -> Provenance:
    """The `scorer_version` and `judge_model` of `scorer`, as `evaluation_events` takes them
    (empty for a scorer whose attributes cannot be read: a result never fails for it)."""
    try:
        return {"scorer_version": scorer_version(scorer), "judge_model": judge_model(scorer)}
    except Exception:  # noqa: BLE001 - a broken property of a scorer of the user's own
        return {}


def scorer_version(scorer: Any) -> str:
    """`scorer.version` when it has one, else its computed version (once per object)."""
    declared = getattr(scorer, "version", None)
    if declared is not None:
        return str(declared)
    try:
        cached = _cache.get(scorer)
    except TypeError:  # neither hashable nor weakly referable: computed each time
        return compute_version(scorer)
    if cached is None:
        cached = compute_version(scorer)
        try:
            _cache[scorer] = cached
        except TypeError:
            pass
    return cached


def compute_version(scorer: Any) -> str:
    """The version of `scorer` from its id, class, options, judge and the release."""
    cls = type(scorer)
    spec = {"id": str(getattr(scorer, "id", "")), "class": f"{cls.__module__}.{cls.__qualname__}",
            "release": __version__, "code": code_digest(cls), "judge": _judge_spec(scorer),
            "options": options_of(scorer)}
    text = json.dumps(spec, sort_keys=True, separators=(",", ":"), default=str)
    return f"{__version__}+{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def code_digest(cls: type) -> str:
    """A hash of the code that decides `cls`'s scores: tracescore's scoring package (scorers,
    judges, prompts and their data files) and the source files of the classes of `cls`'s own
    outside it (empty parts where no source can be read, e.g. a frozen application)."""
    own = sorted({path for klass in cls.__mro__
                  if not klass.__module__.startswith(("tracescore.", "builtins", "abc"))
                  and (path := _source_file(klass))})
    return hashlib.sha256("|".join([_package_digest(), *map(_file_digest, own)]).encode()
                          ).hexdigest()[:16]


def _source_file(klass: type) -> str | None:
    module = sys.modules.get(klass.__module__)
    try:
        return inspect.getsourcefile(module) if module is not None else None
    except TypeError:  # a built-in or C module
        return None


@functools.cache
def _package_digest() -> str:
    folder = Path(__file__).parent
    return hashlib.sha256("|".join(
        f"{path.name}:{_file_digest(str(path))}" for path in sorted(folder.iterdir())
        if path.suffix in (".py", ".txt")).encode()).hexdigest()


@functools.cache
def _file_digest(path: str) -> str:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return ""


def judge_model(scorer: Any) -> str | None:
    """The judge's model string of `scorer` (None for a scorer without a judge)."""
    judge = getattr(scorer, "judge", None)
    model = getattr(judge, "model", None) if judge is not None else getattr(scorer, "model", None)
    return model if isinstance(model, str) and model else None


def options_of(scorer: Any) -> dict[str, Any]:
    """The options that decide `scorer`'s scores, as plain JSON data (names sorted)."""
    try:
        attributes = vars(scorer)
    except TypeError:  # a scorer with __slots__
        attributes = {name: getattr(scorer, name) for name in _slots(type(scorer))
                      if hasattr(scorer, name)}
    return {name: _canonical(value, 0) for name, value in sorted(attributes.items())
            if not name.startswith("_") and name not in _NOT_SCORER_OPTIONS
            and not _NOT_OPTIONS.search(name)}


def _judge_spec(scorer: Any) -> dict[str, Any] | None:
    model = judge_model(scorer)
    if model is None:
        return None
    judge = getattr(scorer, "judge", None)
    given = getattr(judge, "litellm_kwargs", None)
    options = {k: _canonical(given[k], 0) for k in _JUDGE_OPTIONS
               if isinstance(given, Mapping) and k in given}
    json_mode = getattr(judge, "json_mode", None)
    if isinstance(json_mode, str):
        options["json_mode"] = json_mode
    return {"model": model, "options": options}


def _canonical(value: Any, depth: int) -> Any:
    """`value` as JSON data that is equal for equal options (never an object address)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, float)):  # 1 and 1.0 are the same option
        number = float(value)
        return number if math.isfinite(number) else repr(number)
    if isinstance(value, enum.Enum):
        return f"{type(value).__qualname__}.{value.name}"
    if depth >= _MAX_DEPTH:
        return _name_of(value)
    if isinstance(value, Mapping):
        return {str(k): _canonical(v, depth + 1)
                for k, v in sorted(value.items(), key=lambda item: str(item[0]))}
    if isinstance(value, (list, tuple)):
        return [_canonical(v, depth + 1) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((_canonical(v, depth + 1) for v in value), key=json.dumps)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: _canonical(getattr(value, f.name), depth + 1)
                  for f in dataclasses.fields(value) if not _NOT_OPTIONS.search(f.name)}
        return {"type": _name_of(value), "fields": fields}
    if callable(value) or isinstance(value, type):
        return _name_of(value)
    inner = getattr(value, "__dict__", None)
    if isinstance(inner, dict):
        return {"type": _name_of(value),
                "fields": {k: _canonical(v, depth + 1) for k, v in sorted(inner.items())
                           if not k.startswith("_") and not _NOT_OPTIONS.search(k)}}
    return _name_of(value)


def _name_of(value: Any) -> str:
    """A function's or class's qualified name, else the qualified name of the value's type."""
    target = value if callable(value) and hasattr(value, "__qualname__") else type(value)
    return f"{getattr(target, '__module__', '')}.{getattr(target, '__qualname__', '')}"


def _slots(cls: type) -> list[str]:
    names: list[str] = []
    for klass in cls.__mro__:
        slots = vars(klass).get("__slots__", ())
        names.extend([slots] if isinstance(slots, str) else slots)
    return names
