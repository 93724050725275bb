"""Scorers by name: the names `configure(scorers=...)`, `run_evals`, the gateway config and the
`tracescore` command accept, and the factory each one builds."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tracescore._env import JUDGE_MODEL
from tracescore._exceptions import ConfigurationError
from tracescore.scoring._base import Scorer
from tracescore.scoring._judge_api import OFFLINE_MODEL

ENV_JUDGE_MODEL = JUDGE_MODEL.name

# accepted name -> scorer id (ids are names too; `_` and `-` are interchangeable)
SCORER_ALIASES: dict[str, str] = {
    "relevancy": "answer-relevancy",
    "answer-relevancy": "answer-relevancy",
    "llm-judge": "llm-judge",  # the LLM judge of a criterion of your own (its id: its `name`)
    "similarity": "content-similarity",
    "content-similarity": "content-similarity",
    "textual-difference": "textual-difference",
    "difference": "textual-difference",
    "keyword-coverage": "keyword-coverage",
    "keywords": "keyword-coverage",
    "tool-call-accuracy": "tool-call-accuracy",
    "completeness": "completeness",
    "tone-consistency": "tone-consistency",
    "tone": "tone-consistency",
    "faithfulness": "faithfulness",
    "hallucination": "hallucination",
    "context-relevance": "context-relevance",
    "toxicity": "toxicity",
    "bias": "bias",
    "llm-tool-call-accuracy": "llm-tool-call-accuracy",
    "tool-call-accuracy-llm": "llm-tool-call-accuracy",
    "judged-tool-call-accuracy": "llm-tool-call-accuracy",
}
SCORER_IDS = tuple(dict.fromkeys(SCORER_ALIASES.values()))
# what the command and the gateway run when no scorer is named
DEFAULT_SCORERS = ("answer-relevancy", "content-similarity")
# no useful default: options say what to expect (the expected tools, the available tools)
NEEDS_OPTIONS = frozenset({"tool-call-accuracy", "llm-tool-call-accuracy"})
# the scorers that take a judge `model`
JUDGED = frozenset({"answer-relevancy", "faithfulness", "hallucination", "context-relevance",
                    "toxicity", "bias", "llm-tool-call-accuracy"})


def judge_model(option: str | None) -> str:
    """The judge model: the option, else $TRACESCORE_JUDGE_MODEL, else the offline judge."""
    return option or JUDGE_MODEL.get() or OFFLINE_MODEL


def scorer_id(name: str) -> str:
    """The scorer id for a name (`relevancy`, `similarity`, ... or a full id)."""
    sid = SCORER_ALIASES.get(name.strip().lower().replace("_", "-"))
    if sid is None:
        raise ConfigurationError(f"unknown scorer {name!r}; choose from {', '.join(SCORER_IDS)}")
    return sid


def _factories() -> dict[str, Callable[..., Scorer]]:
    from tracescore.scoring.bias import create_bias_scorer
    from tracescore.scoring.completeness import create_completeness_scorer
    from tracescore.scoring.context_relevance import create_context_relevance_scorer
    from tracescore.scoring.difference import create_textual_difference_scorer
    from tracescore.scoring.faithfulness import create_faithfulness_scorer
    from tracescore.scoring.hallucination import create_hallucination_scorer
    from tracescore.scoring.keywords import create_keyword_coverage_scorer
    from tracescore.scoring.llm_judge import create_llm_judge_scorer
    from tracescore.scoring.relevancy import create_answer_relevancy_scorer
    from tracescore.scoring.similarity import create_content_similarity_scorer
    from tracescore.scoring.tone import create_tone_scorer
    from tracescore.scoring.tool_selection import create_tool_call_accuracy_scorer_llm
    from tracescore.scoring.tools import create_tool_call_accuracy_scorer
    from tracescore.scoring.toxicity import create_toxicity_scorer

    return {
        "llm-judge": create_llm_judge_scorer,
        "answer-relevancy": create_answer_relevancy_scorer,
        "content-similarity": create_content_similarity_scorer,
        "textual-difference": create_textual_difference_scorer,
        "keyword-coverage": create_keyword_coverage_scorer,
        "tool-call-accuracy": create_tool_call_accuracy_scorer,
        "completeness": create_completeness_scorer,
        "tone-consistency": create_tone_scorer,
        "faithfulness": create_faithfulness_scorer,
        "hallucination": create_hallucination_scorer,
        "context-relevance": create_context_relevance_scorer,
        "toxicity": create_toxicity_scorer,
        "bias": create_bias_scorer,
        "llm-tool-call-accuracy": create_tool_call_accuracy_scorer_llm,
    }


def create_scorer(name: str, options: Mapping[str, Any] | None = None, *,
                  model: str | None = None) -> Scorer:
    """The scorer called `name`, built with `options` (its factory's keyword arguments).

    A judged scorer without a `model` option uses `model`, else $TRACESCORE_JUDGE_MODEL, else
    the offline judge (which the LLM judge refuses: it needs a language model).
    The LLM judge ("llm-judge") is built with its own `name`, which becomes its scorer id.
    """
    sid = scorer_id(name)
    kwargs = dict(options or {})
    if (sid in JUDGED or sid == "llm-judge") and "model" not in kwargs:
        kwargs["model"] = judge_model(model)
    try:
        return _factories()[sid](**kwargs)
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
