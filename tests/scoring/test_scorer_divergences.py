"""The decided divergences from the reference (docs/scorers.md, "Decided divergences"): each
behaves as documented, and the documented way to get the reference's number gets it."""

from __future__ import annotations

import pytest

from tracescore import ConfigurationError
from tracescore._exceptions import ScorerError
from tracescore.scoring import (
    create_content_similarity_scorer,
    create_tool_call_accuracy_scorer,
    create_trajectory_accuracy_scorer,
)

RUN = [{"name": "search", "type": "tool_call", "arguments": {"q": 9007199254740992}}]


def test_arguments_without_a_type_are_compared_and_leaving_them_out_compares_names() -> None:
    with_args = [{"name": "search", "arguments": {"q": "rain"}}]
    assert create_trajectory_accuracy_scorer(expected_trajectory=with_args).run(
        trajectory=RUN).score == 0.0
    assert create_trajectory_accuracy_scorer(expected_trajectory=[{"name": "search"}]).run(
        trajectory=RUN).score == 1.0  # the reference's number for the first


def test_integers_beyond_two_to_the_53_are_compared_exactly() -> None:
    expected = [{"name": "search", "arguments": {"q": 9007199254740993}}]
    assert create_trajectory_accuracy_scorer(expected_trajectory=expected).run(
        trajectory=RUN).score == 0.0


def test_no_expected_steps_and_an_empty_order_are_refused() -> None:
    with pytest.raises(ScorerError, match="no expected trajectory"):
        create_trajectory_accuracy_scorer().run(trajectory=RUN)
    with pytest.raises(ConfigurationError, match="expected_tool or expected_tool_order"):
        create_tool_call_accuracy_scorer(expected_tool_order=[])


def test_content_similarity_options_not_given_keep_their_defaults() -> None:
    partial = create_content_similarity_scorer(options={"ignoreCase": False})
    assert (partial.ignore_case, partial.ignore_whitespace) == (False, True)
    explicit = create_content_similarity_scorer(options={"ignoreCase": False,
                                                         "ignoreWhitespace": False})
    assert (explicit.ignore_case, explicit.ignore_whitespace) == (False, False)
