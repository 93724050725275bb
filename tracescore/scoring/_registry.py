"""Scorers by name: the names `configure(scorers=...)`, `run_evals`, the gateway config and the
`tracescore` command accept, and the factory each one builds."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any

from tracescore._env import JUDGE_MODEL
from tracescore._exceptions import ConfigurationError
from tracescore.scoring._base import Scorer
from tracescore.scoring._judge_api import OFFLINE_MODEL
from tracescore.scoring._names import ALIASES, DECLARED, normal_name

ENV_JUDGE_MODEL = JUDGE_MODEL.name

# The tables below are filled from what each scorer class declares (its `id`, `aliases`,
# `uses_judge` and `factory`; see tracescore.scoring._names). Importing this module imports the
# package, whose `__init__` defines every built-in scorer class.
SCORER_ALIASES: dict[str, str] = ALIASES  # accepted name -> scorer id (`_` and `-` alike)
SCORER_IDS = tuple(DECLARED)
# what the command and the gateway run when no scorer is named
DEFAULT_SCORERS = ("answer-relevancy", "content-similarity")
# the scorers that take a judge `model` (the LLM judge too, whose id is the name it is given)
JUDGED = frozenset(d.id for d in DECLARED.values() if d.uses_judge and not d.named_by_user)


def judge_model(option: str | None) -> str:
    """The judge model: the option, else $TRACESCORE_JUDGE_MODEL, else the offline judge."""
    return option or JUDGE_MODEL.get() or OFFLINE_MODEL


def scorer_id(name: str) -> str:
    """The scorer id for a name (`relevancy`, `similarity`, ... or a full id)."""
    sid = ALIASES.get(normal_name(name))
    if sid is None:
        raise ConfigurationError(f"unknown scorer {name!r}; choose from {', '.join(SCORER_IDS)}")
    return sid


def _factory(sid: str) -> Callable[..., Scorer]:
    declared = DECLARED[sid]
    factory: Callable[..., Scorer] = getattr(import_module(declared.module), declared.factory)
    return factory


def create_scorer(name: str, options: Mapping[str, Any] | None = None, *,
                  model: str | None = None) -> Scorer:
    """The scorer called `name`, built with `options` (its factory's keyword arguments).

    A judged scorer without a `model` option uses `model`, else $TRACESCORE_JUDGE_MODEL, else
    the offline judge (which the LLM judge refuses: it needs a language model).
    The LLM judge ("llm-judge") is built with its own `name`, which becomes its scorer id.
    """
    sid = scorer_id(name)
    kwargs = dict(options or {})
    if DECLARED[sid].uses_judge and "model" not in kwargs:
        kwargs["model"] = judge_model(model)
    try:
        return _factory(sid)(**kwargs)
    except TypeError as exc:
        raise ConfigurationError(f"scorer {sid!r}: {exc}") from None


def resolve_scorers(scorers: list[Any]) -> list[Any]:
    """`scorers` with each name (a string) or spec (`{"scorer": name, "options": {...}}`, the
    gateway config's form) replaced by the scorer it describes."""
    return [create_scorer(s) if isinstance(s, str)
            else _from_spec(s, i) if isinstance(s, Mapping) else s
            for i, s in enumerate(scorers)]


def _from_spec(spec: Mapping[Any, Any], index: int) -> Scorer:
    where = f"scorers[{index}]"
    unknown = sorted(str(k) for k in spec if k not in ("scorer", "options"))
    if unknown:
        raise ConfigurationError(f"{where}.{unknown[0]}: unknown key; a scorer spec has scorer "
                                 f"and options (the scorer's own settings go under options)")
    name, options = spec.get("scorer"), spec.get("options")
    if not isinstance(name, str):
        raise ConfigurationError(f"{where}.scorer must be a scorer name, got {name!r}")
    if options is not None and not isinstance(options, Mapping):
        raise ConfigurationError(f"{where}.options must be a mapping, got {options!r}")
    try:
        return create_scorer(name, options)
    except ConfigurationError as exc:
        raise ConfigurationError(f"{where}: {exc}") from None
