"""What `run_evals` returns: `EvalResult`, its `EvalSummary`, one `ItemResult` per item and
the `ItemFailure`s."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tracescore.scoring import Scorer, ScoreResult

    # a scorer, its name, or a spec {"scorer": name, "options": {...}} (the gateway config's form)
    ScorerSpec = Scorer | str | Mapping[str, Any]



# Steps an item can fail at (ItemFailure.step).
STEP_TARGET = "target"
STEP_CALLBACK = "on_item_complete"


@dataclass(frozen=True, kw_only=True)
class ItemFailure:
    """Why one item (or one scorer on it) has no result: the step, the scorer and the error."""

    index: int
    step: str  # "target", "on_item_complete", or the scorer step ("preprocess", "analyze", ...)
    scorer_id: str | None
    error_type: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "step": self.step,
            "scorer_id": self.scorer_id,
            "error_type": self.error_type,
            "message": self.message,
        }


@dataclass(frozen=True, kw_only=True)
class ItemResult:
    """One dataset item: what went in, what came out, its scores and failures."""

    index: int
    input: Any
    output: Any
    ground_truth: Any
    metadata: dict[str, Any]
    scores: dict[str, ScoreResult]  # scorer id -> result (successful scorers only)
    failures: tuple[ItemFailure, ...] = ()
    duration_ms: float = 0.0  # the target call alone
    trace_id: str | None = None

    @property
    def ok(self) -> bool:
        """True when the target and every scorer succeeded."""
        return not self.failures

    def to_dict(self) -> dict[str, Any]:
        from tracescore._content import to_json_safe

        return {
            "index": self.index,
            "input": to_json_safe(self.input),
            "output": to_json_safe(self.output),
            "ground_truth": to_json_safe(self.ground_truth),
            "metadata": to_json_safe(self.metadata),
            "scores": {sid: r.to_dict() for sid, r in self.scores.items()},
            "failures": [f.to_dict() for f in self.failures],
            "duration_ms": self.duration_ms,
            "trace_id": self.trace_id,
        }


@dataclass(frozen=True, kw_only=True)
class EvalSummary:
    """Counts and verdict of a run.

    `errored_items` had a target or scorer failure; `passed_items` had none and met every
    threshold (every error-free item passes when no thresholds are given);
    `failed_items = total_items - passed_items`. `unscored` names each scorer that scored no
    item of a non-empty run, with why: `"12 of 12 items errored: <first error>"` (a judge that
    is unreachable or refuses the key); `tracescore eval` fails such a run unless told to
    allow errors.
    """

    total_items: int
    passed_items: int
    failed_items: int
    errored_items: int
    thresholds: dict[str, float] = field(default_factory=dict)
    threshold_results: dict[str, bool] = field(default_factory=dict)  # scorer id -> mean met?
    duration_s: float = 0.0
    unscored: dict[str, str] = field(default_factory=dict)  # scorer id -> why it has no score

    def to_dict(self) -> dict[str, Any]:
        return {
            "total_items": self.total_items,
            "passed_items": self.passed_items,
            "failed_items": self.failed_items,
            "errored_items": self.errored_items,
            "thresholds": dict(self.thresholds),
            "threshold_results": dict(self.threshold_results),
            "duration_s": self.duration_s,
            "unscored": dict(self.unscored),
        }


@dataclass(frozen=True, kw_only=True)
class EvalResult:
    """Outcome of `run_evals`: mean score per scorer id, summary, items and failures.

    `scores[id]` is the mean over the items that scorer scored (None when it scored none).
    `passed` is None without thresholds, else True when every scorer's mean meets its minimum.
    """

    name: str
    run_id: str
    scores: dict[str, float | None]
    summary: EvalSummary
    items: tuple[ItemResult, ...]
    failures: tuple[ItemFailure, ...]
    passed: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "run_id": self.run_id,
            "scores": dict(self.scores),
            "passed": self.passed,
            "summary": self.summary.to_dict(),
            "items": [item.to_dict() for item in self.items],
            "failures": [f.to_dict() for f in self.failures],
        }
