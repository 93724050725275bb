"""Differential tests of the NLP-based scorers against the reference system's own npm package
(@mastra/evals, pinned in tests/mastra): completeness, whose `compromise` extraction has no
Python twin, must keep the agreement published in docs/scorers.md on a fixed corpus, and its
matching rule must equal the reference's exactly; tone consistency, built on the `sentiment`
package's data and rules, must equal the reference exactly."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _helpers import npm_project
from _nlp_corpus import HELD_OUT, REALISTIC, corpus, held_out_corpus, tone_texts
from hypothesis import given
from hypothesis import strategies as st

from tracescore import ConfigurationError
from tracescore.scoring.completeness import coverage, create_completeness_scorer, extract_elements
from tracescore.scoring.tone import _sentences, create_tone_scorer, sentiment_labels

MASTRA = Path(__file__).resolve().parents[1] / "mastra"

# The figures published in docs/scorers.md: pairs (of the corpus the rules were developed on,
# and of the held-out one) whose completeness score equals the reference's, and is within 0.1.
AGREEMENT = {"development": (377, 390), "held-out": (178, 191)}


def _reference(script: Path, cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    done = subprocess.run(["node", str(script)], input=json.dumps({"cases": cases}).encode(),
                          capture_output=True, check=True, timeout=300)  # fmt: skip
    return list(json.loads(done.stdout))


@pytest.fixture(scope="module")
def reference() -> Path:
    return npm_project(MASTRA, "score.mjs", "mastra-evals")


def _completeness_runs(reference: Path, pairs: list[tuple[str, str]]
                       ) -> list[tuple[str, str, dict[str, Any]]]:
    theirs = _reference(reference, [{"scorer": "completeness", "input": a, "output": b}
                                    for a, b in pairs])
    return [(a, b, t) for (a, b), t in zip(pairs, theirs, strict=True)]


@pytest.fixture(scope="module")
def completeness_runs(reference: Path) -> list[tuple[str, str, dict[str, Any]]]:
    return _completeness_runs(reference, corpus())


@pytest.fixture(scope="module")
def held_out_runs(reference: Path) -> list[tuple[str, str, dict[str, Any]]]:
    return _completeness_runs(reference, held_out_corpus())


def test_corpus_is_large_and_realistic() -> None:
    pairs = corpus()
    assert len(pairs) >= 300 and len(REALISTIC) >= 50
    assert len(set(pairs)) >= 0.9 * len(pairs)
    held_out = held_out_corpus()
    assert len(held_out) >= 200 and len(HELD_OUT) >= 40
    assert not {text for pair in HELD_OUT for text in pair} & {
        text for pair in REALISTIC for text in pair}


def test_completeness_matching_rule_equals_the_reference(
        completeness_runs: list[tuple[str, str, dict[str, Any]]]) -> None:
    """Given the reference's own elements, our coverage gives its score exactly."""
    partial = 0
    for a, b, theirs in completeness_runs:
        step = theirs["preprocess"]
        ours = coverage(step["inputElements"], step["outputElements"])
        assert ours == theirs["score"], (a, b)
        partial += 0 < ours < 1
    assert partial >= 100


@pytest.mark.parametrize("name", sorted(AGREEMENT))
def test_completeness_agrees_with_the_reference_as_published(
        name: str, completeness_runs: list[tuple[str, str, dict[str, Any]]],
        held_out_runs: list[tuple[str, str, dict[str, Any]]]) -> None:
    runs = completeness_runs if name == "development" else held_out_runs
    scorer = create_completeness_scorer()
    differences = [abs(scorer.run(input=a, output=b).score - theirs["score"])
                   for a, b, theirs in runs]
    same, close = sum(d < 1e-9 for d in differences), sum(d <= 0.1 for d in differences)
    print(f"completeness agreement ({name}, {len(runs)} pairs): {same} same, {close} within "
          f"0.1, mean |difference| {sum(differences) / len(differences):.4f}")
    assert same >= AGREEMENT[name][0] and close >= AGREEMENT[name][1]


def test_completeness_steps() -> None:
    result = create_completeness_scorer().run(input="What is the capital of France?",
                                              output="Paris is the capital of France.")
    step = result.preprocess_step_result
    assert step["input_elements"] == ["what", "be", "the", "capital", "of", "france"]
    assert step["missing_elements"] == ["what"]
    assert step["element_counts"] == {"input": 6, "output": 6}
    assert result.score == 5 / 6 and result.label == "complete"
    assert result.reason == "The output covers 5 of the 6 elements of the input."


@pytest.mark.parametrize(("text", "elements"), [
    ("The dogs were barking loudly.", ["the", "dogs", "bark", "loudly"]),
    ("She isn't running; it's raining.", ["it", "s", "she", "does", "not", "run", "rain"]),
    ("I don't think so", ["i", "do", "not", "think", "so"]),
    ("The report shows that sales increased.", ["the", "report", "show", "that", "sales",
                                                "increase"]),
    ("Café MÜLLER, 3:45pm", ["cafe", "muller", "3", "45pm"]),
    ("", []),
])
def test_elements_have_verbs_in_base_form(text: str, elements: list[str]) -> None:
    assert extract_elements(text) == elements


_ELEMENTS = st.lists(st.text("abcdefgh", min_size=1, max_size=8), max_size=8)


@given(_ELEMENTS, _ELEMENTS)
def test_coverage_is_a_share_and_self_coverage_is_full(reference: list[str],
                                                       response: list[str]) -> None:
    value = coverage(reference, response)
    assert 0 <= value <= 1
    if reference:
        assert coverage(reference, reference + response) == 1
    else:
        assert value == (0.0 if response else 1.0)


def test_completeness_without_the_nlp_extra_is_a_configuration_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "simplemma", None)  # as if not installed
    with pytest.raises(ConfigurationError, match=r"tracescore\[nlp\]"):
        create_completeness_scorer()


@pytest.fixture(scope="module")
def tone_texts_scored(reference: Path) -> list[tuple[str, str | None, dict[str, Any]]]:
    texts = tone_texts()
    references = [None if i % 3 else texts[(i * 7) % len(texts)] for i in range(len(texts))]
    cases = [{"scorer": "tone", "input": "", "output": text,
              "options": {} if ref is None else {"referenceTone": ref}}
             for text, ref in zip(texts, references, strict=True)]
    theirs = _reference(reference, cases)
    return [(t, r, s) for t, r, s in zip(texts, references, theirs, strict=True)]


def test_tone_texts_cover_the_hard_parts() -> None:
    texts = tone_texts()
    assert len(texts) >= 300
    for needle in ("constructor", "don't", "😂", "\n", "\xa0", "?", "$", "can't stand"):
        assert sum(needle in t for t in texts) >= 3, needle


def test_tone_equals_the_reference(
        tone_texts_scored: list[tuple[str, str | None, dict[str, Any]]]) -> None:
    """Every score and step figure equals the reference's exactly, in both modes."""
    stable = steady = 0
    for text, reference_tone, theirs in tone_texts_scored:
        ours = create_tone_scorer(reference_tone=reference_tone).run(input="", output=text)
        step, expected = ours.preprocess_step_result, theirs["preprocess"]
        assert ours.score == theirs["score"], (text, reference_tone)
        if not reference_tone:  # none, or empty: the reference scores stability then too
            assert (step["avg_sentiment"], step["sentiment_variance"]) == (
                expected["avgSentiment"], expected["sentimentVariance"]), text
            steady += 0 < ours.score < 1
        else:
            assert (step["response_sentiment"], step["reference_sentiment"],
                    step["difference"]) == (expected["responseSentiment"],
                                            expected["referenceSentiment"],
                                            expected["difference"]), (text, reference_tone)
            stable += 0 < ours.score < 1
    assert stable >= 30 and steady >= 15  # not only the trivial 0 and 1


def test_sentiment_words_equal_the_installed_package(reference: Path) -> None:
    done = subprocess.run(["node", str(reference), "sentiment-labels"], capture_output=True,
                          check=True, timeout=60)  # fmt: skip
    assert sentiment_labels() == json.loads(done.stdout)


@given(st.text(alphabet="ab .!?\n\u2028"))
def test_sentences_match_the_reference_regex(text: str) -> None:
    """The linear-time sentence split equals `text.match(/[^.!?]+[.!?]+/g)`."""
    assert _sentences(text) == re.findall(r"[^.!?]+[.!?]+", text)
