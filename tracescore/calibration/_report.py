"""`calibrate()`: run a scorer over human-labelled items and report how well it agrees.

Items are dataset items (`input`, `output`, optionally `ground_truth`, `context`, `tool_calls`)
with a human label under `label_key`. Items without a label are counted and skipped; an item the
scorer fails on is an error (kept in the report) and does not count in the agreement.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracescore._exceptions import ConfigurationError, ScorerError
from tracescore.calibration._labels import LabelSpace, LabelSpec, is_empty, resolve_space
from tracescore.calibration._stats import (
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    Agreement,
    agreement,
)

if TYPE_CHECKING:
    from tracescore.scoring import Scorer, ScoreResult

KAPPA_WEIGHTS = ("none", "linear", "quadratic")
Progress = Callable[[int, int], None]


@dataclass(frozen=True, kw_only=True)
class CalibrationRow:
    """One labelled item: the human's label, the judge's score and its place in the label space."""

    index: int
    input: Any
    output: Any
    human_label: Any
    human_value: float  # the code (pass/fail, categories) or the 0..1 score
    score: float
    goodness: float  # the score as 0 (worst) .. 1 (best)
    judge_label: str  # the score mapped to the label space
    human_category: str
    reason: str | None
    distance: float  # how far the judge is from the human (0: agrees)

    @property
    def agrees(self) -> bool:
        return self.judge_label == self.human_category

    def to_dict(self) -> dict[str, Any]:
        from tracescore._content import to_json_safe

        return {"index": self.index, "input": to_json_safe(self.input),
                "output": to_json_safe(self.output), "human_label": to_json_safe(self.human_label),
                "human_category": self.human_category, "score": self.score,
                "goodness": self.goodness, "judge_label": self.judge_label,
                "agrees": self.agrees, "distance": self.distance, "reason": self.reason}


@dataclass(frozen=True, kw_only=True)
class CalibrationError:
    """An item the scorer could not score."""

    index: int
    error_type: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "error_type": self.error_type, "message": self.message}


@dataclass(frozen=True, kw_only=True)
class RunCost:
    """What the run cost: judge calls, tokens, USD (None: no price known) and time."""

    judge_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    duration_s: float = 0.0
    mean_latency_ms: float | None = None  # one item's scoring, judge calls included

    def to_dict(self) -> dict[str, Any]:
        return {"judge_calls": self.judge_calls, "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens, "cost_usd": self.cost_usd,
                "duration_s": self.duration_s, "mean_latency_ms": self.mean_latency_ms}


@dataclass(frozen=True, kw_only=True)
class CalibrationReport:
    """Agreement of a scorer with human labels, the items it disagrees on and the run's cost.

    `gate_kappa` is the kappa `min_kappa` is compared with (`kappa_weights` picks the weighted
    form for ordered categories); `passed` is None without `min_kappa`. `scorer_version` is the
    version the scorer's results carry (`tracescore.scorer.version`): a score with the same
    version came from the scorer this report measured.
    """

    scorer_id: str
    judge_model: str | None
    space: LabelSpace
    agreement: Agreement
    rows: tuple[CalibrationRow, ...]
    errors: tuple[CalibrationError, ...] = ()
    unlabelled: int = 0
    cost: RunCost = field(default_factory=RunCost)
    kappa_weights: str = "none"
    min_kappa: float | None = None
    scorer_name: str | None = None
    scorer_version: str | None = None

    @property
    def gate_kappa(self) -> float | None:
        a = self.agreement
        return {"linear": a.kappa_linear, "quadratic": a.kappa_quadratic}.get(
            self.kappa_weights, a.kappa) if self.space.kind == "categories" else a.kappa

    @property
    def passed(self) -> bool | None:
        if self.min_kappa is None:
            return None
        return self.gate_kappa is not None and self.gate_kappa >= self.min_kappa

    @property
    def disagreements(self) -> tuple[CalibrationRow, ...]:
        """The items where judge and human differ, worst first."""
        return tuple(sorted((r for r in self.rows if r.distance > 0),
                            key=lambda r: (-r.distance, r.index)))

    def to_dict(self) -> dict[str, Any]:
        return {"scorer_id": self.scorer_id, "scorer_name": self.scorer_name,
                "scorer_version": self.scorer_version, "judge_model": self.judge_model,
                "labels": self.space.to_dict(), "agreement": self.agreement.to_dict(),
                "kappa_weights": self.kappa_weights, "gate_kappa": self.gate_kappa,
                "min_kappa": self.min_kappa, "passed": self.passed,
                "items": len(self.rows), "unlabelled": self.unlabelled,
                "errors": [e.to_dict() for e in self.errors], "cost": self.cost.to_dict(),
                "disagreements": [r.to_dict() for r in self.disagreements],
                "rows": [r.to_dict() for r in self.rows]}


def calibrate(data: str | Path | Iterable[Mapping[str, Any]], scorer: Scorer | str, *,
              labels: LabelSpec | None = None, label_key: str = "label",
              judge_model: str | None = None, scorer_options: Mapping[str, Any] | None = None,
              concurrency: int = 4, min_kappa: float | None = None,
              kappa_weights: str = "none", confidence: float = DEFAULT_CONFIDENCE,
              resamples: int = DEFAULT_RESAMPLES, seed: int = 0,
              progress: Progress | None = None) -> CalibrationReport:
    """Score every labelled item of `data` (a dataset file or items) with `scorer` (a scorer or
    its name, built with `scorer_options` and `judge_model`) and measure the agreement with the
    human labels under `label_key`. Raises ConfigurationError for a bad dataset, label or option.
    """
    if kappa_weights not in KAPPA_WEIGHTS:
        raise ConfigurationError(f"kappa_weights must be one of {', '.join(KAPPA_WEIGHTS)}, "
                                 f"got {kappa_weights!r}")
    if not isinstance(concurrency, int) or concurrency < 1:
        raise ConfigurationError(f"concurrency must be a positive integer, got {concurrency!r}")
    items = _items(data)
    labelled = [(i, item) for i, item in enumerate(items) if not is_empty(item.get(label_key))]
    if not labelled:
        raise ConfigurationError(f"no item has a {label_key!r} label")
    missing = next((i for i, item in labelled if "output" not in item), None)
    if missing is not None:
        raise ConfigurationError(f"item {missing} has no 'output' (the answer that was labelled)")
    chosen = _scorer(scorer, judge_model, scorer_options)
    from tracescore.scoring._provenance import scorer_version

    version = scorer_version(chosen)  # from its options, before any run
    space = resolve_space([item[label_key] for _, item in labelled], labels, chosen.id)
    human = {i: space.human_value(item[label_key], f"item {i}") for i, item in labelled}
    started = time.perf_counter()
    outcomes, latencies = _score_all(chosen, labelled, concurrency, progress)
    duration = time.perf_counter() - started
    scale = float(getattr(chosen, "scale", 1.0) or 1.0)
    rows, errors = [], []
    for (index, item), outcome in zip(labelled, outcomes):
        if isinstance(outcome, BaseException):
            errors.append(CalibrationError(index=index, error_type=type(outcome).__name__,
                                           message=str(outcome) or type(outcome).__name__))
            continue
        rows.append(_row(index, item, label_key, human[index], outcome, space, scale))
    if not rows:
        first = errors[0].message if errors else "nothing to score"
        raise ScorerError(f"no item was scored ({len(errors)} errors; the first: {first})",
                          scorer_id=chosen.id, step="score")
    stats = agreement([r.human_value for r in rows], [space.judge_code(r.goodness) for r in rows],
                      [r.goodness for r in rows], levels=space.levels,
                      ordinal=space.kind == "categories", scores=space.kind == "score",
                      pass_from=space.levels - space.pass_categories,
                      threshold=space.threshold, weights=kappa_weights, confidence=confidence,
                      resamples=resamples, seed=seed)
    results = [o for o in outcomes if not isinstance(o, BaseException)]
    return CalibrationReport(
        scorer_id=chosen.id, judge_model=_model(chosen, results), space=space, agreement=stats,
        rows=tuple(rows), errors=tuple(errors), unlabelled=len(items) - len(labelled),
        cost=_cost(results, latencies, duration), kappa_weights=kappa_weights, min_kappa=min_kappa,
        scorer_name=str(getattr(chosen, "name", None) or chosen.id), scorer_version=version)


def _items(data: str | Path | Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    from tracescore._datasets import DatasetError, load_dataset

    if isinstance(data, (str, Path)):
        try:
            return list(load_dataset(data))
        except DatasetError as exc:
            raise ConfigurationError(str(exc)) from None
    items = list(data)
    for i, item in enumerate(items):
        if not isinstance(item, Mapping) or "input" not in item:
            raise ConfigurationError(f"item {i} must be a mapping with an 'input'")
    return items


def _scorer(scorer: Scorer | str, model: str | None,
            options: Mapping[str, Any] | None) -> Scorer:
    if not isinstance(scorer, str):
        return scorer
    from tracescore.scoring._registry import create_scorer

    return create_scorer(scorer, options, model=model)


def _score_all(scorer: Scorer, labelled: Sequence[tuple[int, Mapping[str, Any]]],
               concurrency: int, progress: Progress | None) -> tuple[list[Any], list[float]]:
    """Each item's ScoreResult, or the exception its scoring raised, in item order; and how
    long each item took (ms)."""
    from tracescore.scoring._trace_data import item_trace

    done = 0
    latencies: list[float] = []
    lock = threading.Lock()

    def one(pair: tuple[int, Mapping[str, Any]]) -> Any:
        nonlocal done
        index, item = pair
        started = time.perf_counter()
        try:
            tool_calls, context = item_trace(item, f"item {index}")
            return scorer.run(input=item["input"], output=item.get("output"),
                              ground_truth=item.get("ground_truth"), tool_calls=tool_calls,
                              context=context)
        except Exception as exc:  # noqa: BLE001 - one failed item is data, not the end
            return exc
        finally:
            with lock:
                latencies.append((time.perf_counter() - started) * 1000.0)
                done += 1
                if progress is not None:
                    progress(done, len(labelled))

    with ThreadPoolExecutor(max_workers=concurrency,
                            thread_name_prefix="tracescore-calibrate") as pool:
        outcomes = list(pool.map(one, labelled))
    return outcomes, latencies


def _row(index: int, item: Mapping[str, Any], label_key: str, human: float,
         result: ScoreResult, space: LabelSpace, scale: float) -> CalibrationRow:
    goodness = space.goodness(result.score, scale)
    judge_code = space.judge_code(goodness)
    if space.kind == "score":
        distance = abs(goodness - human) if judge_code != space.human_code(human) else 0.0
    else:
        distance = float(abs(judge_code - int(human)))
    return CalibrationRow(index=index, input=item["input"], output=item.get("output"),
                          human_label=item[label_key], human_value=human, score=result.score,
                          goodness=goodness, judge_label=space.name(judge_code),
                          human_category=space.name(space.human_code(human)),
                          reason=result.reason, distance=round(distance, 6))


def _model(scorer: Scorer, results: Sequence[ScoreResult]) -> str | None:
    used = next((r.usage.model for r in results if r.usage.model), None)
    judge = getattr(scorer, "judge", None)
    return used or getattr(judge, "model", None)


def _cost(results: Sequence[ScoreResult], latencies: Sequence[float],
          duration_s: float) -> RunCost:
    prices = [r.usage.cost_usd for r in results if r.usage.cost_usd is not None]
    return RunCost(judge_calls=sum(r.usage.calls for r in results),
                   input_tokens=sum(r.usage.input_tokens for r in results),
                   output_tokens=sum(r.usage.output_tokens for r in results),
                   cost_usd=sum(prices) if prices else None, duration_s=round(duration_s, 3),
                   mean_latency_ms=round(sum(latencies) / len(latencies), 3) if latencies
                   else None)
