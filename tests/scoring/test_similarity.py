"""Content similarity: the reference numbers, rapidfuzz algorithms, options and properties."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rapidfuzz import fuzz
from rapidfuzz.distance import JaroWinkler, Levenshtein

from tracescore import (
    ConfigurationError,
    ContentSimilarityScorer,
    ScorerError,
    create_content_similarity_scorer,
)
from tracescore.scoring import similarity
from tracescore.scoring._jstext import JS_WHITESPACE_RUN
from tracescore.scoring.similarity import ALGORITHMS, dice_similarity

FOX = "The quick brown fox"


@pytest.mark.parametrize(("a", "b", "options", "expected"), [
    (FOX, "the quick brown fox", {}, 1.0),
    ("The Quick Brown FOX", "the quick brown fox", {"ignore_case": False}, 7 / 15),
    ("The quick brown fox jumps over the lazy dog",
     "The quick brown fox runs past the lazy dog", {}, 48 / 67),
    (FOX, "", {}, 0.0),
    ("", "", {}, 1.0),
    ("a", "a", {}, 1.0),
    ("a", "b", {}, 0.0),
    ("ab", "a", {}, 0.0),
])
def test_reference_examples(a: str, b: str, options: dict[str, Any], expected: float) -> None:
    result = create_content_similarity_scorer(**options).run(input=a, output=b)
    assert result.score == pytest.approx(expected, abs=1e-12)


def test_reference_numbers_to_the_digits() -> None:
    scorer = create_content_similarity_scorer()
    fox = scorer.run(input="The quick brown fox jumps over the lazy dog",
                     output="The quick brown fox runs past the lazy dog")
    assert f"{fox.score:.8f}" == "0.71641791"
    case = create_content_similarity_scorer(ignore_case=False).run(
        input="The Quick Brown FOX", output="the quick brown fox")
    assert f"{case.score:.4f}" == "0.4667"


def _utf16(text: str) -> tuple[int, ...]:
    data = text.encode("utf-16-le", "surrogatepass")
    return tuple(int.from_bytes(data[i:i + 2], "little") for i in range(0, len(data), 2))


def _dice_reference(a: str, b: str) -> float:
    """The coefficient written out plainly, to compare the fast implementation with: over
    UTF-16 code units, JavaScript's whitespace removed (as the reference's string-similarity)."""
    units_a, units_b = (_utf16(JS_WHITESPACE_RUN.sub("", text)) for text in (a, b))
    if units_a == units_b:
        return 1.0
    if len(units_a) < 2 or len(units_b) < 2:
        return 0.0
    ba = Counter(units_a[i:i + 2] for i in range(len(units_a) - 1))
    bb = Counter(units_b[i:i + 2] for i in range(len(units_b) - 1))
    return 2 * sum((ba & bb).values()) / (len(units_a) + len(units_b) - 2)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200), st.text(max_size=200))
def test_fast_dice_equals_the_plain_formula(a: str, b: str) -> None:
    assert dice_similarity(a, b) == pytest.approx(_dice_reference(a, b), abs=1e-12)


@settings(max_examples=50, deadline=None)
@given(st.text(alphabet="abcdé€𝄞 \n", min_size=60, max_size=400),
       st.text(alphabet="abcdé€𝄞 \n", min_size=60, max_size=400))
def test_fast_dice_on_long_texts_with_wide_characters(a: str, b: str) -> None:
    assert dice_similarity(a, b) == pytest.approx(_dice_reference(a, b), abs=1e-12)


# Characters of every width the fast path encodes differently: ASCII, Latin-1, the BMP (lone
# surrogate code points included) and beyond the BMP; mixing them in one pair forces the widest.
_ALPHABETS = {
    "ascii": "abcab. \n\t\x1c",
    "latin-1": "abcéÿ\xa0\x85 ",
    "bmp": "abé€\ud800\udc00\u2028\u3000 ",
    "astral": "ab€𝄞\U0010ffff\xa0 ",
}


@pytest.mark.parametrize("route", ["sort", "count"])
@pytest.mark.parametrize(("left", "right"), [
    ("ascii", "ascii"), ("latin-1", "latin-1"), ("bmp", "bmp"), ("astral", "astral"),
    ("ascii", "latin-1"), ("latin-1", "bmp"), ("ascii", "astral"), ("bmp", "astral"),
])
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_both_counting_routes_equal_the_plain_formula(route: str, left: str, right: str,
                                                      data: st.DataObject) -> None:
    a = data.draw(st.text(alphabet=_ALPHABETS[left], max_size=120), label="a")
    b = data.draw(st.text(alphabet=_ALPHABETS[right], max_size=120), label="b")
    # the sort-and-LCS route for short texts, the dict-counting route for long ones
    limit = 10**9 if route == "sort" else 0
    with mock.patch.object(similarity, "_SORT_MAX_CHARS", limit):
        assert dice_similarity(a, b) == pytest.approx(_dice_reference(a, b), abs=1e-12)


def test_repeated_bigrams_count_as_a_multiset() -> None:
    # "aaaa" has bigrams {aa: 3}, "aa" has {aa: 1}: the intersection is 1, not 3 and not a set
    for route_limit in (0, 10**9):
        with mock.patch.object(similarity, "_SORT_MAX_CHARS", route_limit):
            assert dice_similarity("aaaa", "aa") == 2 * 1 / 4
            assert dice_similarity("abab", "baba") == 2 * 2 / 6
            assert dice_similarity("ab" * 400, "ab" * 399 + "ba") == pytest.approx(
                _dice_reference("ab" * 400, "ab" * 399 + "ba"), abs=1e-12)


def test_javascripts_whitespace_is_removed_as_in_the_reference() -> None:
    assert dice_similarity(" a\tb\nc\xa0d\u2028e\u3000f\ufeffg\u205fh ", "abcdefgh") == 1.0
    for kept in ("\x1c", "\x85"):  # Python's whitespace, not JavaScript's `\s`
        assert dice_similarity(f"ab{kept}cd", "abcd") == 2 * 2 / 7


def _js_collapse(text: str) -> str:
    """`text.replace(/\\s+/g, " ").trim()`, written as a split."""
    return " ".join(word for word in JS_WHITESPACE_RUN.split(text) if word)


@pytest.mark.parametrize("text", [
    "a  b " * 40, " ab" * 50, "ab " * 50, "a\tb " * 40, "a\x1cb " * 40, "ab\xa0" * 50, "ab" * 60,
])
def test_long_texts_are_whitespace_normalised_like_the_reference(text: str) -> None:
    for candidate in (text, _js_collapse(text)):
        result = create_content_similarity_scorer(ignore_case=False).run(input=candidate, output="x")
        assert result.preprocess_step_result["processed_input"] == _js_collapse(candidate)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["ab ", "ab  \t\n\x1c", "ab \xa0é\x85\ufeff"]).flatmap(
    lambda alphabet: st.text(alphabet=alphabet, max_size=400)))
def test_whitespace_normalisation_equals_the_references(text: str) -> None:
    for candidate in (text, text * 40, _js_collapse(text) * 40):
        result = create_content_similarity_scorer(ignore_case=False).run(input=candidate, output="x")
        assert result.preprocess_step_result["processed_input"] == _js_collapse(candidate)


def test_whitespace_is_always_ignored_by_dice_like_the_reference() -> None:
    # ignore_whitespace only normalises the processed texts; bigrams never include whitespace
    strict = create_content_similarity_scorer(ignore_whitespace=False)
    result = strict.run(input="a  b c", output="abc")
    assert result.score == 1.0
    assert result.preprocess_step_result["processed_input"] == "a  b c"
    loose = create_content_similarity_scorer().run(input="  a  b\tc ", output="abc")
    assert loose.preprocess_step_result["processed_input"] == "a b c"


def test_compares_with_ground_truth_when_given() -> None:
    scorer = create_content_similarity_scorer()
    with_truth = scorer.run(input="unrelated question", output=FOX, ground_truth=FOX.upper())
    assert with_truth.score == 1.0
    assert with_truth.preprocess_step_result == {
        "processed_input": FOX.lower(), "processed_output": FOX.lower(),
        "compared_with": "ground_truth"}
    without = scorer.run(input="unrelated question", output=FOX)
    assert without.score < 0.3
    assert without.preprocess_step_result["compared_with"] == "input"


def test_result_fields() -> None:
    result = create_content_similarity_scorer(scale=10).run(
        input="The quick brown fox jumps over the lazy dog",
        output="The quick brown fox runs past the lazy dog", run_id="r1")
    assert result.run_id == "r1"
    assert result.scorer_id == "content-similarity" and result.scorer_name == "Content Similarity"
    assert result.score == pytest.approx(48 / 67 * 10)
    assert result.analyze_step_result == {"similarity": pytest.approx(48 / 67)}
    assert result.label == "partially_similar"
    assert result.usage.calls == 0 and result.usage.model is None
    assert result.preprocess_prompt is None and result.analyze_prompt is None
    assert result.generate_reason_prompt is None
    assert "0.7164" in result.reason
    json.dumps(result.to_dict())


@pytest.mark.parametrize(("a", "b", "label"), [
    (FOX, FOX, "similar"),
    ("The quick brown fox jumps over the lazy dog",
     "The quick brown fox runs past the lazy dog", "partially_similar"),
    (FOX, "completely different", "dissimilar"),
])
def test_labels(a: str, b: str, label: str) -> None:
    assert create_content_similarity_scorer().run(input=a, output=b).label == label


@pytest.mark.parametrize(("algorithm", "expected"), [
    ("ratio", lambda a, b: fuzz.ratio(a, b) / 100),
    ("partial_ratio", lambda a, b: fuzz.partial_ratio(a, b) / 100),
    ("token_set_ratio", lambda a, b: fuzz.token_set_ratio(a, b) / 100),
    ("token_sort_ratio", lambda a, b: fuzz.token_sort_ratio(a, b) / 100),
    ("jaro_winkler", JaroWinkler.normalized_similarity),
    ("levenshtein", Levenshtein.normalized_similarity),
    ("normalized_levenshtein", Levenshtein.normalized_similarity),
])
def test_rapidfuzz_algorithms_normalised(algorithm: str, expected) -> None:
    a, b = "the quick brown fox jumps", "the quick brown dog jumped"
    result = create_content_similarity_scorer(algorithm=algorithm, scale=2).run(input=a, output=b)
    assert result.analyze_step_result["similarity"] == pytest.approx(expected(a, b))
    assert result.score == pytest.approx(2 * expected(a, b))
    assert 0 < result.analyze_step_result["similarity"] < 1


def test_token_set_ratio_ignores_word_order() -> None:
    scorer = create_content_similarity_scorer(algorithm="token_set_ratio")
    assert scorer.run(input="brown fox quick the", output=FOX).score == 1.0


_SYMMETRIC = list(ALGORITHMS)  # every algorithm offered is symmetric


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(ALGORITHMS), st.text(max_size=60), st.text(max_size=60),
       st.sampled_from([1, 5, 0.5]))
def test_in_range_and_identical_is_one(algorithm: str, a: str, b: str, scale: float) -> None:
    scorer = ContentSimilarityScorer(algorithm=algorithm, scale=scale)
    score = scorer.run(input=a, output=b).score
    assert 0.0 <= score <= scale
    assert scorer.run(input=a, output=a).score == scale
    if a.isascii():  # (JS-like lower(): Unicode case pairs such as 'ﬀ'/'FF' do not round-trip)
        assert scorer.run(input=a, output=a.upper()).score == scale  # case ignored by default


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(_SYMMETRIC), st.text(max_size=60), st.text(max_size=60))
def test_symmetric_algorithms(algorithm: str, a: str, b: str) -> None:
    scorer = ContentSimilarityScorer(algorithm=algorithm)
    assert scorer.run(input=a, output=b).score == pytest.approx(scorer.run(input=b, output=a).score)


def test_chat_shapes_are_accepted() -> None:
    scorer = create_content_similarity_scorer()
    result = scorer.run(
        input=[{"role": "user", "content": "ignored"}],
        output={"messages": [{"role": "assistant", "content": [{"type": "text", "text": FOX}]}]},
        ground_truth={"text": FOX})
    assert result.score == 1.0


def test_unusable_output_is_a_clear_error() -> None:
    with pytest.raises(ScorerError) as info:
        create_content_similarity_scorer().run(input="q", output={"a": "x", "b": "y"})
    assert info.value.step == "preprocess" and info.value.scorer_id == "content-similarity"
    assert "cannot tell which value" in str(info.value)


async def test_arun_and_run_agree() -> None:
    scorer = create_content_similarity_scorer()
    assert (await scorer.arun(input=FOX, output="the quick")).score == \
        scorer.run(input=FOX, output="the quick").score


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"algorithm": "cosine"}, "unknown similarity algorithm 'cosine'; choose one of dice"),
    ({"algorithm": 3}, "algorithm must be a name"),
    ({"scale": -1}, "scale must be"),
    ({"scale": "1"}, "scale must be"),
    ({"ignore_case": "yes"}, "ignore_case must be True or False"),
    ({"options": {"ignoreCase": False, "colour": 1}}, "unknown option 'colour'"),
])
def test_configuration_errors(kwargs, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        create_content_similarity_scorer(**kwargs)


def test_reference_style_options_merge_with_defaults() -> None:
    scorer = create_content_similarity_scorer(options={"ignoreCase": False})
    assert (scorer.ignore_case, scorer.ignore_whitespace, scorer.algorithm) == (False, True, "dice")


def test_does_not_use_a_judge() -> None:
    assert ContentSimilarityScorer().uses_judge is False
