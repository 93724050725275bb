"""The figures behind `tracescore report`, read from stored spans (an OTLP JSON archive or
Phoenix): every scorer result with its agent, time, score and judge usage, grouped by agent and
scorer into pass rates over time with Wilson intervals, distributions, worst calls, judge cost,
unscored reasons and scorer versions; and, where people labelled calls, the pass rate corrected
by their labels (`corrected_pass_rate`) beside the judge-only one.

A result passes when its goodness (the score, or 1 - score for scorers where higher is worse,
as a fraction of the group's scale: 1, or the largest score seen when scores go above 1) reaches
`threshold`.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

from tracescore import _semconv as sc
from tracescore._exceptions import ConfigurationError
from tracescore.calibration import CorrectedPassRate, LabelSpace, corrected_pass_rate
from tracescore.calibration._labels import HIGHER_IS_WORSE, KNOWN_CATEGORIES
from tracescore.cli._otlp import FileSpan

UNKNOWN_AGENT = "(no agent name)"
# bucket widths tried, smallest first (seconds): the first that gives at most MAX_BUCKETS
_WIDTHS = (1, 5, 10, 30, 60, 300, 900, 3600, 3 * 3600, 6 * 3600, 86400, 7 * 86400)
MAX_BUCKETS = 30
HISTOGRAM_BINS = 10


@dataclass(frozen=True, kw_only=True)
class Result:
    """One scorer result on one agent call."""

    agent: str
    scorer: str
    name: str  # gen_ai.evaluation.name (the scorer id when the result has none)
    version: str | None
    trace_id: str
    span_id: str
    time_ns: int
    score: float | None  # None: the run failed (see error)
    label: str | None
    reason: str | None
    error: str | None
    judge_model: str | None
    judge_calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    judge_trace_id: str | None
    question: str | None


@dataclass(frozen=True, kw_only=True)
class Bucket:
    """Results of one time bucket: their pass rate with its Wilson interval and mean goodness."""

    start_ns: int
    end_ns: int
    n: int
    passed: int
    rate: float
    low: float
    high: float
    mean: float


@dataclass(frozen=True, kw_only=True)
class VersionStat:
    version: str
    n: int
    first_ns: int
    last_ns: int


@dataclass(frozen=True, kw_only=True)
class Corrected:
    """The corrected pass rate of one scorer version (all agents) and how many labels fed it."""

    scorer: str
    version: str | None
    estimate: CorrectedPassRate


@dataclass(kw_only=True)
class Group:
    """The results of one agent and one scorer."""

    agent: str
    scorer: str
    higher_is_worse: bool
    scale: float
    results: list[Result] = field(default_factory=list)
    buckets: list[Bucket] = field(default_factory=list)
    histogram: list[int] = field(default_factory=list)
    passed: int = 0
    scored: int = 0
    failed: int = 0
    low: float = 0.0
    high: float = 1.0
    worst: list[Result] = field(default_factory=list)
    versions: list[VersionStat] = field(default_factory=list)
    unscored: dict[str, int] = field(default_factory=dict)

    @property
    def rate(self) -> float | None:
        return self.passed / self.scored if self.scored else None

    @property
    def cost_usd(self) -> float | None:
        costs = [r.cost_usd for r in self.results if r.cost_usd is not None]
        return math.fsum(costs) if costs else None

    @property
    def judge_calls(self) -> int:
        return sum(r.judge_calls for r in self.results)

    @property
    def tokens(self) -> tuple[int, int]:
        return (sum(r.input_tokens for r in self.results),
                sum(r.output_tokens for r in self.results))

    def goodness(self, result: Result) -> float:
        value = min(1.0, max(0.0, (result.score or 0.0) / self.scale))
        return 1.0 - value if self.higher_is_worse else value


@dataclass(kw_only=True)
class Report:
    source: str
    threshold: float
    confidence: float
    bucket_s: int
    start_ns: int
    end_ns: int
    groups: list[Group]
    corrected: list[Corrected]
    spans: int
    unscored: dict[tuple[str, str, str], int]  # (agent, scorer, reason) -> count
    judge_models: dict[str, tuple[int, float | None]]  # model -> (calls, cost)
    label_notes: list[str] = field(default_factory=list)


def wilson(passed: int, n: int, confidence: float) -> tuple[float, float]:
    """Wilson score interval of `passed` of `n` (0..1 when n is 0)."""
    if n == 0:
        return 0.0, 1.0
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    p = passed / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def read_results(spans: Sequence[FileSpan]) -> tuple[list[Result], Counter[tuple[str, str, str]]]:
    """Every scorer result among `spans` (on the evaluated span or on its carrier span), and the
    unscored events by (agent, scorer, reason)."""
    by_id = {s.span_id: s for s in spans}
    agents: dict[str, tuple[str, str | None]] = {}
    results: list[Result] = []
    unscored: Counter[tuple[str, str, str]] = Counter()
    for span in spans:
        carrier = bool(span.attributes.get(sc.TS_EVALUATION_CARRIER))
        target = by_id.get(span.parent_span_id or "") if carrier else span
        for name, attributes in span.events:
            if name not in (sc.GEN_AI_EVALUATION_RESULT, sc.TS_UNSCORED):
                continue
            evaluated = target or span
            if evaluated.span_id not in agents:
                agents[evaluated.span_id] = _agent_of(evaluated, span)
            agent, question = agents[evaluated.span_id]
            scorer = str(attributes.get(sc.TS_SCORER_ID)
                         or attributes.get(sc.GEN_AI_EVALUATION_NAME) or "?")
            if name == sc.TS_UNSCORED:
                reason = str(attributes.get(sc.TS_UNSCORED_REASON) or "unknown")
                unscored[(agent, scorer, reason)] += 1
                continue
            results.append(_result(attributes, agent, scorer, evaluated, question))
    return results, unscored


def _result(attributes: Mapping[str, Any], agent: str, scorer: str, evaluated: FileSpan,
            question: str | None) -> Result:
    value = attributes.get(sc.GEN_AI_EVALUATION_SCORE_VALUE)
    score = (float(value) if isinstance(value, (int, float)) and not isinstance(value, bool)
             and math.isfinite(value) else None)
    error = attributes.get(sc.ERROR_TYPE)
    cost = attributes.get(sc.TS_JUDGE_COST_USD)
    return Result(
        agent=agent, scorer=scorer, name=_text(attributes.get(sc.GEN_AI_EVALUATION_NAME)) or scorer,
        version=_text(attributes.get(sc.TS_SCORER_VERSION)),
        trace_id=evaluated.trace_id, span_id=evaluated.span_id,
        time_ns=evaluated.end_ns or evaluated.start_ns,
        score=None if error is not None else score,
        label=_text(attributes.get(sc.GEN_AI_EVALUATION_SCORE_LABEL)),
        reason=_text(attributes.get(sc.GEN_AI_EVALUATION_EXPLANATION)),
        error=_text(error) or (None if score is not None else "no score"),
        judge_model=_text(attributes.get(sc.TS_JUDGE_MODEL)),
        judge_calls=_int(attributes.get(sc.TS_JUDGE_CALLS)),
        input_tokens=_int(attributes.get(sc.TS_JUDGE_INPUT_TOKENS)),
        output_tokens=_int(attributes.get(sc.TS_JUDGE_OUTPUT_TOKENS)),
        cost_usd=float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool)
        else None,
        judge_trace_id=_text(attributes.get(sc.TS_JUDGE_TRACE_ID)),
        question=question)


def _agent_of(evaluated: FileSpan, holder: FileSpan) -> tuple[str, str | None]:
    """(agent name, question) of an evaluated span: as the recognisers read it, else its
    `gen_ai.agent.name` (or its carrier's)."""
    from tracescore.online import recognise
    from tracescore.scoring._inputs import InputError, question_text

    name = (evaluated.attributes.get(sc.GEN_AI_AGENT_NAME)
            or holder.attributes.get(sc.GEN_AI_AGENT_NAME))
    question = None
    try:
        call = recognise(evaluated.name, evaluated.attributes)
    except Exception:  # noqa: BLE001 - a span nothing reads still has its scores shown
        call = None
    if call is not None:
        name = name or call.agent
        try:
            question = question_text(call.input)
        except InputError:
            question = None
    return str(name or UNKNOWN_AGENT), question


def build_report(spans: Sequence[FileSpan], *, source: str, threshold: float = 0.5,
                 confidence: float = 0.95, higher_is_worse: Iterable[str] = (),
                 worst: int = 5, labels: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
                 label_column: str = "label", since_ns: int | None = None,
                 until_ns: int | None = None) -> Report:
    """The report of `spans` (the results of calls that ended in [since, until) when given).
    `labels`: scorer -> labelled items (with trace_id, span_id and `label_column`), for the
    corrected pass rates."""
    if not 0 < confidence < 1:
        raise ConfigurationError(f"confidence must be between 0 and 1, got {confidence}")
    results, unscored = read_results(spans)
    if since_ns is not None or until_ns is not None:
        low, high = since_ns or 0, until_ns or (1 << 63)
        results = [r for r in results if low <= r.time_ns < high]
    worse = HIGHER_IS_WORSE | set(higher_is_worse)
    times = [r.time_ns for r in results] or [0]
    start, end = min(times), max(times)
    width = next((w for w in _WIDTHS if (end - start) / 1e9 / w < MAX_BUCKETS), _WIDTHS[-1])
    grouped: dict[tuple[str, str], list[Result]] = defaultdict(list)
    for result in results:
        grouped[(result.agent, result.scorer)].append(result)
    for agent, scorer, _ in unscored:
        grouped.setdefault((agent, scorer), [])
    groups = [_group(agent, scorer, rows, worse, threshold, confidence, width, start, worst)
              for (agent, scorer), rows in sorted(grouped.items())]
    for (agent, scorer, reason), count in unscored.items():
        next(g for g in groups if (g.agent, g.scorer) == (agent, scorer)).unscored[reason] = count
    models: dict[str, tuple[int, float | None]] = {}
    for result in results:
        if result.judge_model:
            calls, cost = models.get(result.judge_model, (0, None))
            if result.cost_usd is not None:
                cost = (cost or 0.0) + result.cost_usd
            models[result.judge_model] = (calls + result.judge_calls, cost)
    report = Report(source=source, threshold=threshold, confidence=confidence, bucket_s=width,
                    start_ns=start, end_ns=end, groups=groups, corrected=[], spans=len(spans),
                    unscored=dict(unscored), judge_models=models)
    for scorer, items in (labels or {}).items():
        _correct(report, scorer, items, label_column)
    return report


def _group(agent: str, scorer: str, rows: list[Result], worse: AbstractSet[str], threshold: float,
           confidence: float, width: int, start: int, worst: int) -> Group:
    scores = [r.score for r in rows if r.score is not None]
    scale = max(1.0, max(scores, default=1.0))
    group = Group(agent=agent, scorer=scorer, higher_is_worse=scorer in worse, scale=scale,
                  results=sorted(rows, key=lambda r: r.time_ns))
    scored = [r for r in group.results if r.score is not None]
    group.failed = len(rows) - len(scored)
    group.scored = len(scored)
    group.passed = sum(1 for r in scored if group.goodness(r) >= threshold)
    group.low, group.high = wilson(group.passed, group.scored, confidence)
    per_bucket: dict[int, list[Result]] = defaultdict(list)
    for r in scored:
        per_bucket[int((r.time_ns - start) // (width * 1_000_000_000))].append(r)
    for index in sorted(per_bucket):
        members = per_bucket[index]
        passed = sum(1 for r in members if group.goodness(r) >= threshold)
        low, high = wilson(passed, len(members), confidence)
        bucket_start = start + index * width * 1_000_000_000
        group.buckets.append(Bucket(
            start_ns=bucket_start, end_ns=bucket_start + width * 1_000_000_000, n=len(members),
            passed=passed, rate=passed / len(members), low=low, high=high,
            mean=math.fsum(group.goodness(r) for r in members) / len(members)))
    group.histogram = [0] * HISTOGRAM_BINS
    for r in scored:
        group.histogram[min(int(group.goodness(r) * HISTOGRAM_BINS), HISTOGRAM_BINS - 1)] += 1
    group.worst = sorted(scored, key=lambda r: (group.goodness(r), r.time_ns))[:worst]
    versions: dict[str, list[int]] = defaultdict(list)
    for r in rows:
        versions[r.version or "-"].append(r.time_ns)
    group.versions = [VersionStat(version=v, n=len(t), first_ns=min(t), last_ns=max(t))
                      for v, t in sorted(versions.items(), key=lambda kv: min(kv[1]))]
    return group


_PASS_FAIL = LabelSpace(kind="pass_fail", categories=("pass", "fail"), threshold=0.5, cuts=(),
                        higher_is_worse=False, label_scale=1.0, pass_categories=1)


def human_pass(label: Any, threshold: float) -> bool | None:
    """A person's label as pass (True) / fail (False): pass/fail words, a known ordered category
    (the best one passes: relevant, faithful, good), or a score in 0..1 compared with
    `threshold`; None when it is neither (or empty)."""
    if label is None or (isinstance(label, str) and not label.strip()):
        return None
    if isinstance(label, str):
        word = label.strip().lower()
        for categories in KNOWN_CATEGORIES:
            if word in categories:
                return word == categories[0]
    try:
        return _PASS_FAIL.human_value(label, "label") == 1.0
    except ConfigurationError:
        pass
    try:
        number = float(label)
    except (TypeError, ValueError):
        return None
    return number >= threshold if 0 <= number <= 1 else None


def _correct(report: Report, scorer: str, items: Sequence[Mapping[str, Any]],
             label_column: str) -> None:
    """Add the corrected pass rate of `scorer` (its latest labelled version) to `report`."""
    groups = [g for g in report.groups if g.scorer == scorer]
    if not groups:
        report.label_notes.append(f"{scorer}: no result of this scorer in the traces")
        return
    verdicts: dict[tuple[str, str], tuple[str | None, bool]] = {}
    by_version: dict[str | None, list[bool]] = defaultdict(list)
    for group in groups:
        for r in group.results:
            if r.score is not None:
                verdict = group.goodness(r) >= report.threshold
                verdicts[(r.trace_id, r.span_id)] = (r.version, verdict)
                by_version[r.version].append(verdict)
    pairs: dict[str | None, list[tuple[bool, bool]]] = defaultdict(list)
    unreadable = 0
    for item in items:
        key = (str(item.get("trace_id") or "").lower(), str(item.get("span_id") or "").lower())
        found = verdicts.get(key)
        human = human_pass(item.get(label_column), report.threshold)
        if found is None or human is None:
            unreadable += found is not None and human is None
            continue
        pairs[found[0]].append((found[1], human))
    if not pairs:
        report.label_notes.append(f"{scorer}: none of the {len(items)} labelled calls is a "
                                  "result of this scorer in the traces")
        return
    version = max(pairs, key=lambda v: len(pairs[v]))
    labelled = pairs[version]
    if unreadable:
        report.label_notes.append(f"{scorer}: {unreadable} labels are neither pass/fail nor a "
                                  "score in 0..1 (skipped)")
    try:
        estimate = corrected_pass_rate(by_version[version], [j for j, _ in labelled],
                                       [h for _, h in labelled], confidence=report.confidence)
    except ConfigurationError as exc:
        report.label_notes.append(f"{scorer}: {exc}")
        return
    report.corrected.append(Corrected(scorer=scorer, version=version, estimate=estimate))


def _text(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


def _int(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0
