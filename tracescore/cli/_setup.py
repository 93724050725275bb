"""What the commands build from their options: scorers by name, thresholds, scorer options."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tracescore._env import JUDGE_MODEL
from tracescore._targets import SetupError, load_target
from tracescore.cli._scorer_names import CODE_SCORERS, JUDGED_SCORERS, SCORER_NAMES

__all__ = ["ENV_JUDGE_MODEL", "SCORER_NAMES", "SetupError", "build_scorers", "load_target",
           "parse_scorer_options", "parse_thresholds", "parse_tool_calls", "scorer_id",
           "scorer_names"]

if TYPE_CHECKING:
    from tracescore.scoring import Scorer, ToolCall

ENV_JUDGE_MODEL = JUDGE_MODEL.name



def scorer_names(*, judged: bool) -> str:
    """The short names of the judged (or the code) scorers, for the command's help."""
    return ", ".join(JUDGED_SCORERS if judged else CODE_SCORERS)


def scorer_id(name: str) -> str:
    """Scorer id for a CLI name (`relevancy`, `similarity`, or a full id)."""
    from tracescore._exceptions import ConfigurationError
    from tracescore.scoring._registry import scorer_id as registry_id

    try:
        return registry_id(name)
    except ConfigurationError as exc:
        raise SetupError(str(exc)) from None


def build_scorers(names: Sequence[str], model: str,
                  options: Mapping[str, Mapping[str, Any]] | None = None) -> list[Scorer]:
    """One scorer per distinct name (default: relevancy and similarity), judged by `model`,
    built with its `options` (by scorer id, from `parse_scorer_options`)."""
    from tracescore._exceptions import ConfigurationError
    from tracescore.scoring import Judge
    from tracescore.scoring._registry import DEFAULT_SCORERS, create_scorer
    from tracescore.scoring._resolve import check_judge, preflight_judge

    ids = list(dict.fromkeys(scorer_id(n) for n in names)) or list(DEFAULT_SCORERS)
    unused = sorted(set(options or {}) - set(ids))
    if unused:
        raise SetupError(f"--scorer-option for a scorer that does not run: {', '.join(unused)} "
                         f"(add it with --scorer)")
    scorers: list[Scorer] = []
    for sid in ids:
        try:
            scorer = create_scorer(sid, (options or {}).get(sid), model=model)
            judge = getattr(scorer, "judge", None)
            if isinstance(judge, Judge):
                check_judge(judge)  # a typo fails now, not on the first item
        except ConfigurationError as exc:
            hint = (f"give a language model with --judge-model (or --scorer-option "
                    f"{sid}.model=MODEL)" if str(exc).startswith("model:")
                    else f"set options with --scorer-option {sid}.NAME=VALUE")
            raise SetupError(f"{exc} (scorer {sid}: {hint})") from None
        scorers.append(scorer)
    for scorer in scorers:  # the model and the API key, before the first item
        judge = getattr(scorer, "judge", None)
        if isinstance(judge, Judge):
            try:
                preflight_judge(judge)
            except ConfigurationError as exc:
                raise SetupError(f"{exc} (scorer {scorer.id})") from None
    return scorers


def parse_scorer_options(values: Sequence[str]) -> dict[str, dict[str, Any]]:
    """`["tool-call-accuracy.expected_tool=search"]` -> `{"tool-call-accuracy": {...}}`; each
    VALUE is read as YAML (`3`, `true`, `[a, b]`, `{a: 1}`), anything else stays a string (so
    does prose that YAML would read as a mapping: `The answer is polite: it thanks`)."""
    import yaml

    options: dict[str, dict[str, Any]] = {}
    for raw in values:
        target, sep, text = raw.partition("=")
        name, dot, key = target.partition(".")
        if not sep or not dot or not key.strip():
            raise SetupError(f"bad scorer option {raw!r}; write it as SCORER.NAME=VALUE, e.g. "
                             f"tool-call-accuracy.expected_tool=search")
        try:
            value = yaml.safe_load(text) if text.strip() else text
        except yaml.YAMLError:
            value = text
        if isinstance(value, dict) and not text.lstrip().startswith("{"):
            value = text
        options.setdefault(scorer_id(name), {})[key.strip()] = value
    return options


def parse_tool_calls(values: Sequence[str]) -> tuple[ToolCall, ...]:
    """`--tool-call` values (a tool name, or a JSON object with name, arguments, result, error)
    -> the tool calls, in order."""
    from tracescore._exceptions import ConfigurationError
    from tracescore.scoring._trace_data import as_tool_calls

    calls: list[Any] = []
    for raw in values:
        if raw.lstrip().startswith("{"):
            try:
                calls.append(json.loads(raw))
            except json.JSONDecodeError as exc:
                raise SetupError(f"--tool-call {raw!r}: not valid JSON ({exc.msg})") from None
        else:
            calls.append(raw)
    try:
        return as_tool_calls(calls, "--tool-call")
    except ConfigurationError as exc:
        raise SetupError(str(exc)) from None


def parse_thresholds(values: Sequence[str]) -> dict[str, float]:
    """`["relevancy=0.7", ...]` -> `{"answer-relevancy": 0.7}`."""
    limits: dict[str, float] = {}
    for raw in values:
        name, sep, number = raw.partition("=")
        if not sep:
            raise SetupError(f"bad threshold {raw!r}; write it as SCORER=MIN, e.g. relevancy=0.7")
        try:
            minimum = float(number)
        except ValueError:
            raise SetupError(f"bad threshold {raw!r}: {number!r} is not a number") from None
        limits[_threshold_target(name.strip())] = minimum
    return limits


def _threshold_target(name: str) -> str:
    """The scorer id a threshold names: a built-in scorer's name, else the name itself (an LLM
    judge is called by the name it was given; the run checks that such a scorer runs)."""
    from tracescore._exceptions import ConfigurationError
    from tracescore.scoring._registry import scorer_id as registry_id

    try:
        return registry_id(name)
    except ConfigurationError:
        return name
