"""The decided divergences from the reference (docs/scorers.md, "Decided divergences"): each
behaves as documented, and `mastra_compat=True` (the reference's number; checked against the
reference itself in test_reference_divergences.py) works wherever scorers are configured:
factories, the registry, run_evals, the gateway config and the command's scorer options."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

import tracescore
from tracescore import ConfigurationError, load_gateway_config
from tracescore._exceptions import ScorerError
from tracescore.cli._setup import build_scorers, parse_scorer_options
from tracescore.scoring import (
    create_content_similarity_scorer,
    create_tool_call_accuracy_scorer,
    create_trajectory_accuracy_scorer,
)
from tracescore.scoring._registry import create_scorer

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


def test_mastra_compat_turns_the_options_not_given_off() -> None:
    given: list[tuple[dict[str, bool] | None, dict[str, Any], tuple[bool, bool]]] = [
        ({"ignoreCase": False}, {}, (False, False)),
        (None, {"ignore_whitespace": True}, (False, True)),
        ({}, {}, (False, False)), (None, {}, (True, True))]
    for options, kwargs, switches in given:
        scorer = create_content_similarity_scorer(options=options, **kwargs, mastra_compat=True)
        assert (scorer.ignore_case, scorer.ignore_whitespace) == switches
    with pytest.raises(ConfigurationError, match="mastra_compat must be True or False"):
        create_content_similarity_scorer(mastra_compat="yes")  # type: ignore[arg-type]


BIG = 2**53
# per scorer: options, one item where the divergence decides, and the item's output
PLACES: dict[str, tuple[dict[str, Any], dict[str, Any], Any]] = {
    "trajectory-accuracy": ({"expected_trajectory": [{"name": "search", "arguments": {"q": 1}}]},
                            {"trajectory": [{"name": "search", "type": "llm_call"}]}, "ok"),
    "trajectory": ({"defaults": {"steps": [{"name": "fetch", "type": "tool_call",
                                            "arguments": {"id": BIG + 1}}]}},
                   {"trajectory": [{"name": "fetch", "arguments": {"id": BIG}}]}, "ok"),
    "tool-call-accuracy": ({"expected_tool_order": []}, {}, {"tool_calls": ["search"]}),
    "content-similarity": ({"ignore_whitespace": True}, {}, "hello world"),
}


def _score(scorer: Any, item: dict[str, Any], output: Any) -> float:
    inputs = item if "trajectory" in item else {"input": "Hello World", "output": output}
    return float(scorer.run(**inputs).score)


@pytest.mark.parametrize("sid", sorted(PLACES))
def test_mastra_compat_wherever_scorers_are_configured(sid: str, tmp_path: Path) -> None:
    options, item, output = PLACES[sid]
    compat = {**options, "mastra_compat": True}
    theirs = _score(create_scorer(sid, compat), item, output)
    try:  # the default: another number, or (an empty tool order) refused
        assert _score(create_scorer(sid, options), item, output) != theirs
    except ConfigurationError:
        assert sid == "tool-call-accuracy"
    spec = {"scorer": sid, "options": compat}
    evals = tracescore.run_evals([{"input": "Hello World", **item}], [spec],
                                 target=lambda _: output)
    assert evals.failures == () and evals.scores[sid] == theirs
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump({"scoring": {"scorers": [spec]}}))
    [online] = load_gateway_config(path, environ={}).scorers or ()
    assert _score(online.scorer, item, output) == theirs
    flags = [f"{sid}.{key}={json.dumps(value)}" for key, value in compat.items()]
    [command] = build_scorers([sid], "tracescore/offline", parse_scorer_options(flags))
    assert _score(command, item, output) == theirs
