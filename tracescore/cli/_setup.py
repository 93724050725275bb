"""What the commands build from their options: scorers by name, the judge model, the target."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tracescore.scoring import Scorer, ToolCall

ENV_JUDGE_MODEL = "TRACESCORE_JUDGE_MODEL"
OFFLINE_MODEL = "tracescore/offline"

# the names the command offers (tracescore.scoring._registry resolves them)
SCORER_NAMES = ("relevancy", "answer-relevancy", "llm-judge", "similarity", "content-similarity",
                "textual-difference", "keyword-coverage", "tool-call-accuracy", "faithfulness",
                "hallucination", "context-relevance", "toxicity", "bias", "llm-tool-call-accuracy",
                "completeness", "tone-consistency", "tone")
DEFAULT_SCORERS = ("answer-relevancy", "content-similarity")


class SetupError(Exception):
    """An option that cannot be turned into a working object; the message says why."""


def judge_model(option: str | None) -> str:
    """The judge model: the option, else $TRACESCORE_JUDGE_MODEL, else the offline judge."""
    return option or os.environ.get(ENV_JUDGE_MODEL) or OFFLINE_MODEL


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
    from tracescore.scoring._registry import create_scorer
    from tracescore.scoring._resolve import check_judge

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
            raise SetupError(f"{exc} (scorer {sid}: set options with --scorer-option "
                             f"{sid}.NAME=VALUE)") from None
        scorers.append(scorer)
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
