"""Trajectory scorers (code, no judge): did a whole run take the expected steps, within its
budgets, without forbidden tools or runaway retries?

They judge a run (`ScorerInput.trajectory`: the run's steps in order, or the call's tool calls
when no run is given) against an expectation: the scorer's own, or the dataset item's
`expected_trajectory`. The rules are the reference system's (`createTrajectoryAccuracyScorerCode`
and `createTrajectoryScorerCode` of @mastra/evals 1.10.2); the arithmetic is in
`_trajectory_checks`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracescore._exceptions import ConfigurationError, ScorerError
from tracescore.scoring._base import STEP_PREPROCESS, ScoreResult, ScorerInput, new_run_id
from tracescore.scoring._code import NO_JUDGE
from tracescore.scoring._options import check_flag
from tracescore.scoring._runs import ORDERINGS, Expectation, as_expectation
from tracescore.scoring._scoped import ScopedScorer
from tracescore.scoring._trajectory_checks import blacklisted, compare, evaluate

DEFAULT_WEIGHTS = {"accuracy": 0.4, "efficiency": 0.3, "tool_failures": 0.2, "blacklist": 0.1}


def _expectation(value: Any, name: str) -> Expectation | None:
    return None if value is None else as_expectation(value, name)


def _label(score: float) -> str:
    return "on_track" if score >= 0.8 else "partially_on_track" if score >= 0.5 else "off_track"


class TrajectoryAccuracyScorer(ScopedScorer):
    """How well the run's steps match the expected steps (`relaxed`, `strict` or `unordered`)."""

    id = "trajectory-accuracy"
    name = "Trajectory Accuracy"
    uses_judge = False
    scope = "run"
    factory = "create_trajectory_accuracy_scorer"

    def __init__(self, *, expected_trajectory: Any = None, ordering: str = "relaxed",
                 allow_repeated_steps: bool = True, mastra_compat: bool = False) -> None:
        if ordering not in ORDERINGS:
            raise ConfigurationError(f"ordering must be one of {', '.join(ORDERINGS)}, "
                                     f"got {ordering!r}")
        if not isinstance(allow_repeated_steps, bool):
            raise ConfigurationError(f"allow_repeated_steps must be True or False, "
                                     f"got {allow_repeated_steps!r}")
        self.expected = _expectation(expected_trajectory, "expected_trajectory")
        self.ordering = ordering
        self.allow_repeated_steps = allow_repeated_steps
        self.mastra_compat = check_flag("mastra_compat", mastra_compat)

    def __repr__(self) -> str:
        return f"TrajectoryAccuracyScorer(ordering={self.ordering!r})"

    async def evaluate(self, call: ScorerInput) -> ScoreResult:
        run_id = call.run_id or new_run_id()
        item = call.expected_trajectory
        steps = self.expected.steps if self.expected is not None else None
        if steps is None and item is not None:
            steps = item.steps
        if steps is None and self.mastra_compat:
            return _unexpected(self, run_id, call)
        if steps is None:
            raise ScorerError("no expected trajectory: give the scorer expected_trajectory, or "
                              "the item an expected_trajectory", scorer_id=self.id,
                              step=STEP_PREPROCESS, partial={"run_id": run_id})
        given = item.given if item is not None else frozenset()
        ordering = item.ordering if item is not None and "ordering" in given else self.ordering
        repeated = item.allow_repeated_steps if item is not None and \
            "allow_repeated_steps" in given else self.allow_repeated_steps
        run = call.trajectory
        comparison = compare(run, steps, ordering=ordering, allow_repeated_steps=repeated,
                             mastra_compat=self.mastra_compat)
        score = comparison["score"]
        reason = (f"{comparison['matched_steps']} of {comparison['total_expected_steps']} "
                  f"expected steps matched ({ordering} order)")
        for key, what in (("missing_steps", "missing"), ("extra_steps", "extra"),
                          ("out_of_order_steps", "out of order")):
            if comparison[key]:
                reason += f"; {what}: {', '.join(comparison[key])}"
        return ScoreResult(
            run_id=run_id, scorer_id=self.id, scorer_name=self.name, score=score,
            label=_label(score), reason=reason + ".", usage=NO_JUDGE,
            preprocess_step_result={"actual_steps": run.step_names,
                                    "expected_steps": [s.name for s in steps],
                                    "ordering": ordering, "comparison": comparison})


def _unexpected(scorer: TrajectoryAccuracyScorer, run_id: str, call: ScorerInput) -> ScoreResult:
    """The reference's result for a run without expected steps (`mastra_compat`): 0."""
    missing = "no expected trajectory (mastra_compat: scored 0, as Mastra scores it)"
    return ScoreResult(
        run_id=run_id, scorer_id=scorer.id, scorer_name=scorer.name, score=0.0,
        label=_label(0.0), reason=missing[:1].upper() + missing[1:] + ".", usage=NO_JUDGE,
        preprocess_step_result={"actual_steps": call.trajectory.step_names,
                                "expected_steps": [], "ordering": scorer.ordering,
                                "comparison": None, "error": missing})


class TrajectoryScorer(ScopedScorer):
    """One score for a run from accuracy, efficiency, forbidden tools and tool failures."""

    id = "trajectory"
    name = "Trajectory"
    uses_judge = False
    scope = "run"
    factory = "create_trajectory_scorer"

    def __init__(self, *, defaults: Any = None, weights: Mapping[str, float] | None = None,
                 mastra_compat: bool = False) -> None:
        self.defaults = _expectation(defaults, "defaults") or Expectation()
        unknown = sorted(set(weights or {}) - set(DEFAULT_WEIGHTS))
        if unknown:
            raise ConfigurationError(f"weights: unknown dimension {unknown[0]!r}; choose from "
                                     f"{', '.join(DEFAULT_WEIGHTS)}")
        for key, value in (weights or {}).items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigurationError(f"weights.{key} must be a number, got {value!r}")
        self.weights = {k: max(0.0, float((weights or {}).get(k, v)))
                        for k, v in DEFAULT_WEIGHTS.items()}
        self.mastra_compat = check_flag("mastra_compat", mastra_compat)

    def __repr__(self) -> str:
        return f"TrajectoryScorer(weights={self.weights!r})"

    async def evaluate(self, call: ScorerInput) -> ScoreResult:
        run_id = call.run_id or new_run_id()
        config = call.expected_trajectory.over(self.defaults) \
            if call.expected_trajectory is not None else self.defaults
        try:
            result = evaluate(call.trajectory, config, self.weights,
                              mastra_compat=self.mastra_compat)
        except ValueError as exc:  # a budget the run's data cannot measure
            raise ScorerError(str(exc), scorer_id=self.id, step=STEP_PREPROCESS,
                              partial={"run_id": run_id}) from exc
        score = result.pop("score")
        return ScoreResult(run_id=run_id, scorer_id=self.id, scorer_name=self.name,
                           score=score, label=_label(score), reason=_reason(score, result),
                           usage=NO_JUDGE, preprocess_step_result=result)


def _reason(score: float, result: dict[str, Any]) -> str:
    accuracy, efficiency, black = result["accuracy"], result["efficiency"], result["blacklist"]
    failures, nested = result["tool_failures"], result["nested"] or []
    if black is not None and black["score"] == 0:
        broken = [f"forbidden tool {t}" for t in black["violated_tools"]]
        broken += [f"forbidden sequence {' then '.join(s)}" for s in black["violated_sequences"]]
        return f"Score {score}: the run used {'; '.join(broken)}."
    if blacklisted(nested):
        names = [n["step_name"] for n in nested if blacklisted([n])]
        return f"Score {score}: a forbidden tool was used inside {', '.join(names)}."
    parts = [f"Score {score}"]
    if accuracy is not None:
        text = f"{accuracy['matched_steps']} of {accuracy['total_expected_steps']} expected steps"
        if accuracy["missing_steps"]:
            text += f", missing {', '.join(accuracy['missing_steps'])}"
        parts.append(text)
    if efficiency is not None:
        over = [what for key, what in (("over_step_budget", "steps"), ("over_token_budget",
                "tokens"), ("over_duration_budget", "time")) if efficiency[key]]
        text = f"efficiency {efficiency['score']}"
        if over:
            text += f" (over budget: {', '.join(over)})"
        if efficiency["redundant_calls"]:
            text += f", repeated identical calls: {len(efficiency['redundant_calls'])}"
        parts.append(text)
    if failures["patterns"]:
        retries = failures["total_retries"]
        parts.append(f"{retries} {'retry' if retries == 1 else 'retries'} of a failing tool")
    if nested:
        parts.append("nested: " + ", ".join(f"{n['step_name']} {n['score']}" for n in nested))
    return "; ".join(parts) + "."


def create_trajectory_accuracy_scorer(*, expected_trajectory: Any = None,
                                      ordering: str = "relaxed",
                                      allow_repeated_steps: bool = True,
                                      mastra_compat: bool = False
                                      ) -> TrajectoryAccuracyScorer:
    """The reference system's `createTrajectoryAccuracyScorerCode`: the share of expected steps
    the run took (`relaxed`: in order, others allowed; `strict`: exactly, extra steps cost;
    `unordered`: anywhere), less 0.1 per repeated step name when repeats are not allowed.

    `expected_trajectory` (step names, or objects with name, type, arguments) applies to every
    item; without it each item's `expected_trajectory` is used (its `ordering` and
    `allow_repeated_steps` apply either way).

    `mastra_compat=True` gives Mastra's number where tracescore decided otherwise: a run with
    no expected steps scores 0 (instead of failing), an expected step given arguments but no
    type is compared by name only, and integers beyond 2**53 in arguments compare as doubles.
    """
    return TrajectoryAccuracyScorer(expected_trajectory=expected_trajectory, ordering=ordering,
                                    allow_repeated_steps=allow_repeated_steps,
                                    mastra_compat=mastra_compat)


def create_trajectory_scorer(*, defaults: Any = None,
                             weights: Mapping[str, float] | None = None,
                             mastra_compat: bool = False) -> TrajectoryScorer:
    """The reference system's `createTrajectoryScorerCode`: accuracy (with expected steps),
    efficiency (`max_steps`, `max_total_tokens`, `max_total_duration_ms`,
    `no_redundant_calls`), forbidden tools (`blacklisted_tools`, `blacklisted_sequences`: any
    use scores 0) and retries of failing tools (`max_retries_per_tool`), weighted
    (`weights`: accuracy 0.4, efficiency 0.3, tool_failures 0.2, blacklist 0.1 by default) over
    the dimensions that apply. `defaults` is the expectation for every item; an item's
    `expected_trajectory` overrides it field by field.

    `mastra_compat=True` gives Mastra's number where tracescore decided otherwise: an expected
    step given arguments but no type is compared (and its sub-agent found) by name only, and
    integers beyond 2**53 in arguments compare as doubles.
    """
    return TrajectoryScorer(defaults=defaults, weights=weights, mastra_compat=mastra_compat)
