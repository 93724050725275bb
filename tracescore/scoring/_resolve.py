"""Pick and check a judge: a model string ("tracescore/offline" or a litellm model) or a Judge."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tracescore._exceptions import ConfigurationError
from tracescore.scoring._judge_api import OFFLINE_MODEL, Judge
from tracescore.scoring._litellm_judge import LiteLLMJudge
from tracescore.scoring._offline import OfflineJudge


def _unwrapped(judge: Any) -> Any:
    """The judge a `CachedJudge` asks (the judge itself otherwise)."""
    from tracescore.scoring._judge_cache import CachedJudge

    return judge.inner if isinstance(judge, CachedJudge) else judge


def check_judge(judge: Judge) -> None:
    """Check a judge's whole configuration now (for a LiteLLMJudge: imports litellm)."""
    judge = _unwrapped(judge)
    if isinstance(judge, LiteLLMJudge):
        judge.check()


def preflight_judge(judge: Judge) -> None:
    """Check a judge before its first call: configuration, model and API key (ConfigurationError)."""
    judge = _unwrapped(judge)
    if isinstance(judge, LiteLLMJudge):
        judge.preflight()


def preflight_scorers(scorers: Iterable[Any]) -> None:
    """Preflight the judge of every scorer (a scorer, or an online scorer wrapping one) before any
    work: ConfigurationError naming the scorer when one cannot work (model, API key)."""
    for item in scorers:
        scorer = getattr(item, "scorer", item)
        judge = getattr(scorer, "judge", None)
        if isinstance(judge, Judge):
            try:
                preflight_judge(judge)
            except ConfigurationError as exc:
                raise ConfigurationError(
                    f"scorer {getattr(scorer, 'id', scorer)!r}: {exc}") from None


def resolve_judge(model: Any, judge_kwargs: Mapping[str, Any]) -> Judge:
    """A Judge from a model string ("tracescore/offline" = the offline judge) or Judge object."""
    if isinstance(model, str):
        if model.strip() == OFFLINE_MODEL:
            if judge_kwargs:
                raise ConfigurationError(
                    f"the offline judge takes no options, got {', '.join(sorted(judge_kwargs))}")
            return OfflineJudge()
        return LiteLLMJudge(model, **judge_kwargs)
    if isinstance(model, Judge):
        if judge_kwargs:
            raise ConfigurationError(
                "judge options (" + ", ".join(sorted(judge_kwargs)) + ") only apply to a model "
                "string; configure the Judge object itself instead")
        return model
    raise ConfigurationError(
        f"model must be a litellm model string (e.g. 'openai/gpt-4o-mini'), "
        f"'{OFFLINE_MODEL}', or a Judge object; got {model!r}")
