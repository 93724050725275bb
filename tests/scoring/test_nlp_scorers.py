"""Completeness and tone consistency by name (configure, run_evals, the gateway config, the
command) and their options and inputs."""

from __future__ import annotations

from pathlib import Path

import pytest
from _helpers import live_scores, score_command
from hypothesis import given
from hypothesis import strategies as st

from tracescore import ConfigurationError, ScorerError, load_gateway_config, run_evals
from tracescore.scoring import CompletenessScorer, ToneConsistencyScorer, create_tone_scorer
from tracescore.scoring._registry import create_scorer
from tracescore.scoring.tone import analyze_sentiment, tokenize

QUESTION = "Is the store open on Sundays?"
ANSWER = "Yes, the store is open on Sundays. We love seeing you!"


def test_configure_scores_live_calls_with_both() -> None:
    scores = live_scores(["completeness", "tone"], QUESTION, ANSWER, agent="shop")
    assert scores == {sid: create_scorer(sid).run(input=QUESTION, output=ANSWER).score
                      for sid in ("completeness", "tone-consistency")}


def test_run_evals_gives_ground_truth_to_both() -> None:
    data = [{"input": QUESTION, "ground_truth": "The store is open on Sundays."},
            {"input": "Any news?", "ground_truth": "This is terrible news."}]
    result = run_evals(data, ["completeness", "tone-consistency"], lambda q: ANSWER)
    [first, second] = result.items
    completeness = first.scores["completeness"]
    assert completeness.preprocess_step_result["compared_with"] == "ground_truth"
    assert completeness.score == 1.0
    tone = second.scores["tone-consistency"]
    assert tone.preprocess_step_result["compared_with"] == "ground_truth"
    assert tone.preprocess_step_result["reference_sentiment"] == -3 / 4


def test_gateway_config_builds_both_with_options(tmp_path: Path) -> None:
    path = tmp_path / "gateway.yaml"
    path.write_text("""
scoring:
  scorers:
    - scorer: completeness
      options: {scale: 10}
    - scorer: tone
      options: {reference_tone: "Happy to help!"}
""")
    scorers = [online.scorer for online in load_gateway_config(path, environ={}).scorers or ()]
    assert [type(s) for s in scorers] == [CompletenessScorer, ToneConsistencyScorer]
    assert scorers[0].scale == 10
    assert isinstance(scorers[1], ToneConsistencyScorer)
    assert scorers[1].reference_tone == "Happy to help!"


def test_the_command_scores_with_both() -> None:
    by_id = score_command("--input", QUESTION, "--output", ANSWER, "-s", "completeness",
                          "-s", "tone")
    assert by_id["completeness"]["score"] == create_scorer("completeness").run(
        input=QUESTION, output=ANSWER).score
    assert by_id["tone-consistency"]["preprocess_step_result"]["sentences"] == 2


def test_bad_options_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError, match="reference_tone must be a string"):
        create_tone_scorer(reference_tone=3)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="unknown option 'tone'"):
        create_tone_scorer(options={"tone": "x"})
    with pytest.raises(ConfigurationError, match="scale"):
        create_scorer("completeness", {"scale": 0})


def test_unusable_output_fails_the_preprocess_step() -> None:
    with pytest.raises(ScorerError) as caught:
        create_tone_scorer().run(input=QUESTION, output={"nothing": 1})
    assert caught.value.step == "preprocess"


def test_negation_flips_the_next_word_only() -> None:
    assert analyze_sentiment("good").score == 3
    assert analyze_sentiment("not good").score == -3
    assert analyze_sentiment("not very good").score == 3  # only the word right after
    assert tokenize("Hi!  You\n(there)") == ["hi", "you", "there"]
    assert analyze_sentiment("").comparative == 0 and analyze_sentiment("").tokens == 1


@given(st.text(max_size=200))
def test_tone_scores_stay_in_range(text: str) -> None:
    for scorer in (create_tone_scorer(), create_tone_scorer(reference_tone="great")):
        result = scorer.run(input="", output=text)
        assert 0 <= result.score <= 1


def test_the_command_offers_every_scorer() -> None:
    from tracescore.cli._setup import SCORER_NAMES
    from tracescore.scoring._registry import SCORER_IDS

    assert set(SCORER_IDS) <= set(SCORER_NAMES)
