"""The `scoring.scorers` and `recognise` settings built into online scorers and recognisers
(scorer names or `module:attribute`, their options, reference files)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tracescore._exceptions import ConfigurationError
from tracescore.gateway._config_keys import _text

_SCORER_KEYS = ("scorer", "options", "rate", "agents", "attributes", "rate_limit_per_minute",
                "budget_usd_per_hour", "reference", "sinks", "timeout_s", "fleet", "trace_judge",
                "judge_cache")


def build_online_scorers(specs: Sequence[Any] | None, judge_model: str | None, *,
                         base: Path) -> tuple[Any, ...]:
    """`OnlineScorer`s from `scoring.scorers` entries (dicts as in the YAML, or scorer objects)."""
    from tracescore.online.core import OnlineScorer, as_online_scorers
    from tracescore.scoring._registry import DEFAULT_SCORERS
    from tracescore.scoring._registry import judge_model as pick_model

    model = pick_model(judge_model)
    if not specs:
        specs = [{"scorer": name} for name in DEFAULT_SCORERS]
    built: list[Any] = []
    for index, spec in enumerate(specs):
        where = f"scoring.scorers[{index}]"
        if not isinstance(spec, Mapping):
            built.append(spec)
            continue
        unknown = sorted(str(k) for k in spec if k not in _SCORER_KEYS)
        if unknown:
            raise ConfigurationError(f"{where}.{unknown[0]}: unknown key; expected one of "
                                     f"{', '.join(_SCORER_KEYS)} (the scorer's own settings "
                                     f"go under options)")
        if "scorer" not in spec:
            raise ConfigurationError(f"{where}.scorer is required (relevancy, similarity, "
                                     f"another scorer name or module:attribute)")
        scorer = _scorer(_text(f"{where}.scorer", spec["scorer"]), spec.get("options") or {},
                         model, where)
        online = {k: v for k, v in spec.items() if k not in ("scorer", "options")}
        if "reference" in online:
            online["reference"] = _reference(online["reference"], base, f"{where}.reference")
        if "fleet" in online:
            online["fleet_limits"] = _fleet(online.pop("fleet"), scorer, f"{where}.fleet")
        if "judge_cache" in online:
            _judge_cache(online.pop("judge_cache"), scorer, f"{where}.judge_cache")
        try:
            built.append(OnlineScorer(scorer, **online))
        except (ConfigurationError, TypeError) as exc:
            raise ConfigurationError(f"{where}: {exc}") from None
    try:
        return as_online_scorers(built)
    except ConfigurationError as exc:
        raise ConfigurationError(f"scoring.scorers: {exc}") from None


def _scorer(name: str, options: Any, model: str, where: str) -> Any:
    from tracescore._targets import SetupError, load_target
    from tracescore.scoring import Judge
    from tracescore.scoring._registry import create_scorer, scorer_id
    from tracescore.scoring._resolve import check_judge

    if not isinstance(options, Mapping):
        raise ConfigurationError(f"{where}.options must be a mapping, got {options!r}")
    try:  # module:attribute, else a scorer name
        target, sid = (load_target(name), "") if ":" in name else (None, scorer_id(name))
    except (SetupError, ConfigurationError) as exc:
        raise ConfigurationError(f"{where}.scorer: {exc}") from None
    try:
        if target is not None:
            return target(**options) if isinstance(target, type) or options else target
        scorer = create_scorer(sid, options, model=model)
        judge = getattr(scorer, "judge", None)
        if isinstance(judge, Judge):  # the gateway imports litellm anyway:
            check_judge(judge)  # check everything now
        return scorer
    except (ConfigurationError, TypeError) as exc:
        raise ConfigurationError(f"{where}.options: {exc}") from None


def _fleet(settings: Any, scorer: Any, where: str) -> Any:
    from tracescore.online.core import fleet_limiter_from

    return fleet_limiter_from(settings, str(getattr(scorer, "id", "scorer")), where)


def _judge_cache(settings: Any, scorer: Any, where: str) -> None:
    from tracescore.scoring._judge_cache import cache_judge

    if not isinstance(settings, Mapping) or "redis_url" not in settings or any(
            k not in ("redis_url", "ttl_s") for k in settings):
        raise ConfigurationError(f"{where} must be a mapping of redis_url and ttl_s, got "
                                 f"{settings!r}")
    try:
        cache_judge(scorer, str(settings["redis_url"]), ttl_s=settings.get("ttl_s", 3600.0))
    except ConfigurationError as exc:
        raise ConfigurationError(f"{where}: {exc}") from None


def _reference(value: Any, base: Path, where: str) -> dict[Any, Any]:
    """A reference dataset file (input -> ground_truth) as a mapping."""
    from tracescore._content import lookup_key
    from tracescore._datasets import DatasetError, load_dataset
    from tracescore.online.core import reference_key

    file = Path(_text(where, value))
    if not file.is_absolute():
        file = base / file
    try:
        items = load_dataset(file)
    except DatasetError as exc:
        raise ConfigurationError(f"{where}: {exc}") from None
    found: dict[Any, Any] = {}
    by_question: dict[str, Any] = {}  # any input shape matches any other on its question text
    for item in items:
        if item.get("ground_truth") is None:
            continue
        key = item["input"]
        found[key if isinstance(key, str) else lookup_key(key)] = item["ground_truth"]
        question = reference_key(key)
        if question is not None:
            by_question.setdefault(question, item["ground_truth"])
    return {**by_question, **found}


def _recognisers(mappings: Any, builtins: Any) -> tuple[Any, ...]:
    from tracescore.online.intake import build_recognisers

    return tuple(build_recognisers(mappings, where="recognise.mappings", builtins=builtins,
                                   builtins_key="recognise.builtins"))


def rectifiers_from(value: str, base: Path) -> tuple[Any, ...]:
    """The `rectifiers:` file's rectifiers (a path relative to the config file's folder)."""
    from tracescore.online.core import read_rectifiers

    try:
        return read_rectifiers(base / value)
    except ConfigurationError as exc:
        raise ConfigurationError(f"rectifiers: {exc}") from None
