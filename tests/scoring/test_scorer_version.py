"""A scorer's version (`tracescore.scorer.version` on every result) changes exactly when what
decides its scores changes: any option, the judge model or its sampling options, the release; and
never for a new object with equal options, an API key, headers, a timeout or retries."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

from tracescore import _semconv as sc
from tracescore.online import evaluation_events
from tracescore.scoring import Scorer, ScoreResult, ScorerInput
from tracescore.scoring._names import ALIASES
from tracescore.scoring._provenance import options_of, provenance, scorer_version
from tracescore.scoring._registry import create_scorer

MODEL = "openai/gpt-4o-mini"


def _extract(input: Any, output: Any) -> list[str]:
    return ["retrieved"]


def _other_extract(input: Any, output: Any) -> list[str]:
    return ["other"]


# what each built-in scorer needs to be built at all (None in CHANGES: an option it fixes)
REQUIRED: dict[str, dict[str, Any]] = {
    "llm-judge": {"name": "polite", "instructions": "The answer is polite."},
    "multi-turn-judge": {"criterion": "The user's goal was met."},
    "llm-tool-call-accuracy": {"available_tools": [{"id": "get_weather",
                                                    "description": "Current weather"}]},
    "tool-call-accuracy": {"expected_tool": "get_weather"},
    "noise-sensitivity": {"baseline_response": "Paris.", "noisy_query": "Capital? Cats!"},
    **{f"check-{c}": {"expected": "sunny"} for c in ("includes", "excludes", "equals",
                                                    "similarity")},
    "check-matches": {"pattern": "sun+y"}, "check-called-tool": {"tool_name": "search"},
    "check-did-not-call": {"tool_name": "search"}, "check-tool-order": {"expected_order": []},
    "check-max-tool-calls": {"max": 2},
}
_JUDGED = {"max_judge_input_chars": 5000, "redact_judge_input": False, "scale": 10}
# per scorer: each option with a value other than its default (together they touch every option
# the scorer has: `test_the_table_covers_every_option` fails for an option added without a row)
CHANGES: dict[str, dict[str, Any]] = {
    **{f"check-{c}": {"expected": "rain", "ignore_case": False, "scope": "run"}
       for c in ("includes", "excludes", "equals")},
    "check-similarity": {"expected": "rain", "ignore_case": False, "threshold": 0.5,
                         "scope": "run"},
    "check-matches": {"pattern": "r+ain", "flags": "i", "exact": True, "scope": "run"},
    "check-called-tool": {"tool_name": "fetch", "times": 2, "scope": "run"},
    "check-did-not-call": {"tool_name": "fetch", "scope": "run"},
    "check-tool-order": {"expected_order": ["a"], "scope": "run"},
    "check-max-tool-calls": {"max": 3, "scope": "run"}, "check-used-no-tools": {"scope": "run"},
    "check-no-tool-errors": {"scope": "run"},
    "answer-relevancy": {**_JUDGED, "uncertainty_weight": 0.5},
    "bias": _JUDGED,
    "completeness": {"scale": 10},
    "content-similarity": {"algorithm": "levenshtein", "ignore_case": False,
                           "ignore_whitespace": False, "scale": 10},
    "context-relevance": {**_JUDGED, "context": ["Paris is in France."],
                          "context_extractor": _extract,
                          "penalties": {"missing_context_per_item": 0.2}},
    "faithfulness": {**_JUDGED, "context": ["Paris is in France."]},
    "hallucination": {**_JUDGED, "context": ["Paris is in France."], "get_context": _extract},
    "keyword-coverage": {"scale": 10},
    "llm-judge": {**_JUDGED, "scale": None, "instructions": "The answer is brief.",
                  "mode": "score", "include": ["input", "context"], "scope": "run"},
    "llm-tool-call-accuracy": {**_JUDGED, "scale": None, "available_tools": [
        {"id": "get_time", "description": "Current weather"}]},
    "llm-trajectory-accuracy": {**_JUDGED, "expected_trajectory": ["search", "answer"]},
    "multi-turn-judge": {**_JUDGED, "criterion": "The user was never asked twice."},
    "textual-difference": {"scale": 10},
    "tone-consistency": {"reference_tone": "formal", "scale": 10},
    "tool-call-accuracy": {"expected_tool": "get_time", "expected_tool_order": ["a", "b"],
                           "strict_mode": True, "mastra_compat": True},
    "toxicity": _JUDGED,
    "answer-similarity": {**_JUDGED, "require_ground_truth": False, "semantic_threshold": 0.5,
                          "exact_match_bonus": 0.1, "missing_penalty": 0.3,
                          "contradiction_penalty": 0.5, "extra_info_penalty": 0.1},
    "context-precision": {**_JUDGED, "context": ["Paris is in France."],
                          "context_extractor": _extract},
    "context-recall": {**_JUDGED, "context": ["Paris is in France."],
                       "context_extractor": _extract},
    "noise-sensitivity": {**_JUDGED, "scale": None, "baseline_response": "Lyon.",
                          "noisy_query": "Capital? Dogs!", "noise_type": "distractor",
                          "scoring": {"discrepancy_threshold": 0.5}},
    "prompt-alignment": {**_JUDGED, "evaluation_mode": "user",
                         "include_conversation_history": True},
    "summarization": {**_JUDGED, "source": "A text.", "source_extractor": _extract,
                      "max_questions": 3},
    "rubric": {**_JUDGED, "criteria": ["The answer names a city."]},
    "trajectory": {"defaults": {"ordering": "strict"}, "weights": {"accuracy": 0.9},
                   "mastra_compat": True},
    "trajectory-accuracy": {"expected_trajectory": ["search"], "ordering": "strict",
                            "allow_repeated_steps": False, "mastra_compat": True},
}
# options of mode "score" only, changed on their own from a scorer in that mode
SCORE_MODE = {"score_range": [1, 5], "threshold": 0.8}
CASES = [(sid, option, value) for sid, changes in CHANGES.items()
         for option, value in changes.items() if value is not None]


def build(scorer_id: str, options: dict[str, Any] | None = None, model: str = MODEL) -> Any:
    return create_scorer(scorer_id, {**REQUIRED.get(scorer_id, {}), **(options or {})},
                         model=model)


def test_every_built_in_scorer_has_a_row() -> None:
    assert set(CHANGES) == set(ALIASES.values())


@pytest.mark.parametrize("scorer_id", sorted(CHANGES))
def test_the_table_covers_every_option(scorer_id: str) -> None:
    base = options_of(build(scorer_id))
    touched = {key for option, value in CHANGES[scorer_id].items() if value is not None
               for key, seen in options_of(build(scorer_id, {option: value})).items()
               if base.get(key) != seen}
    fixed = {option for option, value in CHANGES[scorer_id].items() if value is None}
    if scorer_id == "llm-judge":  # its scale is always 1; the mode's own options: below
        fixed |= set(SCORE_MODE)
    assert touched | fixed == set(base)


@pytest.mark.parametrize(("scorer_id", "option", "value"), CASES,
                         ids=[f"{s}-{o}" for s, o, _ in CASES])
def test_each_option_changed_alone_changes_the_version(scorer_id: str, option: str,
                                                       value: Any) -> None:
    assert build(scorer_id, {option: value}).version != build(scorer_id).version


@pytest.mark.parametrize(("option", "value"), SCORE_MODE.items())
def test_score_mode_options_change_the_version(option: str, value: Any) -> None:
    scored = build("llm-judge", {"mode": "score"})
    assert build("llm-judge", {"mode": "score", option: value}).version != scored.version


@pytest.mark.parametrize("scorer_id", sorted(CHANGES))
def test_a_new_object_with_equal_options_has_the_same_version(scorer_id: str) -> None:
    changes = {k: v for k, v in CHANGES[scorer_id].items() if v is not None}
    assert build(scorer_id, changes).version == build(scorer_id, dict(changes)).version
    assert build(scorer_id).version == build(scorer_id).version


@pytest.mark.parametrize("judge_options", [
    {"api_key": "sk-one"}, {"api_key": "sk-two", "extra_headers": {"X-Team": "a"}},
    {"timeout": 5}, {"max_retries": 7}, {"api_base": "http://127.0.0.1:9/v1"},
])
def test_keys_headers_timeouts_and_retries_keep_the_version(judge_options: dict[str, Any]
                                                            ) -> None:
    plain = build("answer-relevancy")
    assert build("answer-relevancy", judge_options).version == plain.version
    assert "sk-" not in repr(options_of(build("answer-relevancy", judge_options)))


@pytest.mark.parametrize("judge_options", [{"temperature": 0.7}, {"seed": 3},
                                           {"json_mode": "prompt"}])
def test_judge_options_that_change_its_answers_change_the_version(
        judge_options: dict[str, Any]) -> None:
    assert build("answer-relevancy", judge_options).version != build("answer-relevancy").version


def test_the_judge_model_changes_the_version_of_judged_scorers_only() -> None:
    assert (build("answer-relevancy", model="openai/gpt-4o").version
            != build("answer-relevancy").version)
    assert (build("answer-relevancy", model="tracescore/offline").version
            != build("answer-relevancy").version)
    assert build("completeness", model="openai/gpt-4o").version == build("completeness").version


def test_the_release_changes_the_version(monkeypatch: pytest.MonkeyPatch) -> None:
    from tracescore.scoring import _provenance

    before = build("completeness").version
    monkeypatch.setattr(_provenance, "__version__", "99.0.0")
    after = build("completeness").version
    assert after != before and after.startswith("99.0.0+") and before.startswith("0.")


@pytest.mark.parametrize("edited", ["_offline_relevancy.py", "_prompts.py", "relevancy.py"])
def test_an_edited_rule_or_prompt_of_tracescore_changes_the_version(
        monkeypatch: pytest.MonkeyPatch, edited: str) -> None:
    from tracescore.scoring import _provenance

    scorer = build("answer-relevancy", model="tracescore/offline")
    before = _provenance.compute_version(scorer)
    real = _provenance._file_digest.__wrapped__
    monkeypatch.setattr(_provenance, "_file_digest",
                        lambda path: real(path) + ("+edit" if path.endswith(edited) else ""))
    _provenance._package_digest.cache_clear()
    try:
        after = _provenance.compute_version(scorer)
    finally:
        monkeypatch.undo()
        _provenance._package_digest.cache_clear()
    assert after != before and after.split("+")[0] == before.split("+")[0]
    assert _provenance.compute_version(scorer) == before


def test_an_edited_scorer_class_of_your_own_changes_its_version(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tracescore.scoring import _provenance

    source = tmp_path / "my_scorers.py"
    source.write_text("from tracescore.scoring import Scorer\n\n"
                      "class Mine(Scorer):\n    id = 'mine'\n    name = 'Mine'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("my_scorers")
    try:
        scorer = module.Mine()
        before = _provenance.compute_version(scorer)
        assert _provenance.compute_version(module.Mine()) == before
        source.write_text(source.read_text() + "    # the rule changed\n")
        _provenance._file_digest.cache_clear()
        assert _provenance.compute_version(scorer) != before
    finally:
        sys.modules.pop("my_scorers", None)
        _provenance._file_digest.cache_clear()


def test_the_version_is_computed_once_per_scorer() -> None:
    scorer = build("content-similarity")
    first = scorer.version
    scorer.scale = 5  # changed after the fact: the scorer keeps the version its results carry
    assert scorer.version == first == scorer_version(scorer)


class _Own(Scorer):
    id = "own"
    name = "Own"
    uses_judge = False

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold

    async def evaluate(self, call: ScorerInput) -> ScoreResult:
        return ScoreResult(run_id="r", scorer_id=self.id, scorer_name=self.name, score=1.0)


class _Declared(_Own):
    version = "v7"


class _ArunOnly:
    id = "arun-only"
    name = "Arun Only"

    def __init__(self, words: int) -> None:
        self.words = words

    async def arun(self, **kwargs: Any) -> ScoreResult:
        return ScoreResult(run_id="r", scorer_id=self.id, scorer_name=self.name, score=1.0)


def test_scorers_of_your_own_get_a_version_or_keep_theirs() -> None:
    assert _Own(0.5).version == _Own(0.5).version != _Own(0.6).version
    assert _Declared(0.5).version == "v7"
    assert scorer_version(_ArunOnly(3)) == scorer_version(_ArunOnly(3))
    assert scorer_version(_ArunOnly(3)) != scorer_version(_ArunOnly(4))


def test_the_result_event_names_the_version_and_the_judge_model() -> None:
    scorer = build("answer-relevancy")
    result = ScoreResult(run_id="r", scorer_id=scorer.id, scorer_name=scorer.name, score=1.0)
    (_, attrs), *_ = evaluation_events(result, scorer_id=scorer.id, scorer_name=scorer.name,
                                       **provenance(scorer))
    assert attrs[sc.TS_SCORER_VERSION] == scorer.version
    assert attrs[sc.TS_JUDGE_MODEL] == MODEL  # also without usage: a failed run names it too
    (_, failed), *_ = evaluation_events(None, scorer_id=scorer.id, scorer_name=scorer.name,
                                        error=ValueError("x"), **provenance(scorer))
    assert (failed[sc.TS_SCORER_VERSION], failed[sc.TS_JUDGE_MODEL]) == (scorer.version, MODEL)
    code = build("completeness")
    (_, attrs), *_ = evaluation_events(result, scorer_id=code.id, scorer_name=code.name,
                                       **provenance(code))
    assert attrs[sc.TS_SCORER_VERSION] == code.version and sc.TS_JUDGE_MODEL not in attrs
