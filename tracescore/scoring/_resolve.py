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


def unready_judges(scorers: Iterable[Any], *, load_clients: bool = True) -> list[str]:
    """What `preflight_scorers` would refuse, one text per scorer whose judge cannot work
    (in process nothing is refused: the agent runs, the scorer's results are failures).
    `load_clients=False`: only what can be told without importing litellm (a common provider's
    missing key), for a process that must not load it."""
    problems = []
    for item in scorers:
        scorer = getattr(item, "scorer", item)
        judge = getattr(scorer, "judge", None)
        try:
            if load_clients:
                preflight_scorers([item])
            elif isinstance(judge, LiteLLMJudge):
                problem = judge.key_problem_without_litellm()
                if problem is not None:
                    raise ConfigurationError(f"scorer {getattr(scorer, 'id', scorer)!r}: {problem}")
        except ConfigurationError as exc:
            problems.append(str(exc))
        except Exception:  # noqa: BLE001, S112 - a check that cannot run refuses nothing
            continue
    return problems


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
