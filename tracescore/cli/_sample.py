"""The work behind `tracescore sample`: scored agent calls drawn from stored traces, stratified by
score, into a labelling file (CSV or JSON Lines) with an empty label column.

A call is an agent span the built-in recognisers read (question and answer as the scorers read
them) with a `gen_ai.evaluation.result` event of the scorer, on the span or on its carrier span.
The scores' range is cut into `strata` equal bins; the `n` calls are shared out as evenly as the
bins allow and drawn at random within each bin (`random.Random(seed)`: the same files and seed
give the same file). The judge's score is left out of the file so that people label blind.
"""

from __future__ import annotations

import csv
import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracescore import _semconv as sc
from tracescore._exceptions import ConfigurationError
from tracescore._private_files import open_private
from tracescore.cli._otlp import FileSpan

LABEL_COLUMN = "label"
_COLUMNS = ("input", "output", "ground_truth", LABEL_COLUMN, "agent", "trace_id", "span_id")
_SUFFIXES = (".csv", ".jsonl")


@dataclass(frozen=True, kw_only=True)
class ScoredCall:
    """An agent call of the stored traces and the score the scorer gave it."""

    trace_id: str
    span_id: str
    agent: str
    input: str
    output: str
    ground_truth: Any
    score: float

    def row(self) -> dict[str, Any]:
        return {"input": self.input, "output": self.output, "ground_truth": self.ground_truth,
                LABEL_COLUMN: "", "agent": self.agent, "trace_id": self.trace_id,
                "span_id": self.span_id}


def scored_calls(spans: Sequence[FileSpan], scorer_id: str) -> list[ScoredCall]:
    """The agent calls among `spans` with a score of `scorer_id` (its last one), in file order."""
    from tracescore.online import recognise
    from tracescore.scoring._inputs import InputError, answer_text, question_text

    parents = {s.span_id: s.parent_span_id for s in spans}
    scores: dict[str, float] = {}
    for span in spans:
        carrier = bool(span.attributes.get(sc.TS_EVALUATION_CARRIER))
        target = parents.get(span.span_id) if carrier else span.span_id
        for name, attributes in span.events:
            value = attributes.get(sc.GEN_AI_EVALUATION_SCORE_VALUE)
            if (name == sc.GEN_AI_EVALUATION_RESULT and target
                    and isinstance(value, (int, float)) and not isinstance(value, bool)
                    and scorer_id in (attributes.get(sc.TS_SCORER_ID),
                                      attributes.get(sc.GEN_AI_EVALUATION_NAME))):
                scores[target] = float(value)
    calls = []
    for span in spans:
        if span.span_id not in scores:
            continue
        call = recognise(span.name, span.attributes)
        if call is None:
            continue
        try:
            question, answer = question_text(call.input), answer_text(call.output)
        except InputError:
            continue
        calls.append(ScoredCall(trace_id=span.trace_id, span_id=span.span_id, agent=call.agent,
                                input=question, output=answer, ground_truth=call.ground_truth,
                                score=scores[span.span_id]))
    return calls


def stratified(calls: Sequence[ScoredCall], n: int, *, strata: int = 5,
               seed: int = 0) -> list[ScoredCall]:
    """`n` of `calls` (all when fewer), spread over `strata` equal bins of their score range."""
    if n < 1 or strata < 1:
        raise ConfigurationError(f"n and strata must be at least 1 (got {n} and {strata})")
    rng = random.Random(seed)
    if len(calls) <= n:
        chosen = list(calls)
    else:
        bins = _bins(calls, strata)
        quotas = _quotas([len(b) for b in bins], n)
        chosen = [call for members, quota in zip(bins, quotas)
                  for call in rng.sample(members, quota)]
    rng.shuffle(chosen)  # no order that gives the score away
    return chosen


def _bins(calls: Sequence[ScoredCall], strata: int) -> list[list[ScoredCall]]:
    low = min(c.score for c in calls)
    width = (max(c.score for c in calls) - low) / strata
    bins: list[list[ScoredCall]] = [[] for _ in range(strata)]
    for call in calls:
        index = strata - 1 if width == 0 else min(int((call.score - low) / width), strata - 1)
        bins[index].append(call)
    return bins


def _quotas(sizes: Sequence[int], n: int) -> list[int]:
    """How many to draw from each bin: equal shares, a small bin's unused share going to the
    others (the first bins get the remainder)."""
    quotas = [0] * len(sizes)
    left = n
    while left > 0:
        open_bins = [i for i, size in enumerate(sizes) if quotas[i] < size]
        share, extra = divmod(left, len(open_bins))
        for rank, i in enumerate(open_bins):
            take = min(sizes[i] - quotas[i], share + (1 if rank < extra else 0))
            quotas[i] += take
            left -= take
    return quotas


def write_labelling_file(path: Path, calls: Iterable[ScoredCall]) -> int:
    """Write the calls as rows with an empty label (CSV or JSON Lines, by suffix); their count."""
    rows = [call.row() for call in calls]
    if not any(row["ground_truth"] is not None for row in rows):
        for row in rows:
            del row["ground_truth"]
    if path.suffix.lower() == ".csv":
        with open_private(path, "w", newline="") as handle:
            columns = [c for c in _COLUMNS if not rows or c in rows[0]]
            writer = csv.DictWriter(handle, fieldnames=columns)
            writer.writeheader()
            for row in rows:
                writer.writerow({k: _cell(v) for k, v in row.items()})
    else:
        with open_private(path, "w") as handle:
            for row in rows:
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    return len(rows)


def check_output(path: Path) -> None:
    if path.suffix.lower() not in _SUFFIXES:
        raise ConfigurationError(f"--out must end in .csv or .jsonl (got {path.name!r})")


def _cell(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
