"""The measurements the trajectory scorers combine: how a run's steps match the expected steps,
its efficiency (budgets, redundant calls), forbidden tools, and retries of failing tools.

The arithmetic is the reference system's (@mastra/evals 1.10.2), fact for fact, so that the
same run and expectation give the same numbers; each function returns plain data for the
scorer's step result. A budget that cannot be measured raises ValueError.

`mastra_compat=True` takes the reference's number where tracescore decided otherwise: an expected
step whose type was only inferred from its arguments is compared by name, and integers beyond
2**53 are compared as the doubles JavaScript reads them as.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable
from typing import Any

from tracescore.scoring._prompting import reference_round
from tracescore.scoring._runs import LLM_CALL, TOOL_CALL, Expectation, ExpectedStep, Run, Step


def js_sum(values: Iterable[float]) -> float:
    """Left to right, one rounding per addition, as JavaScript's `reduce((a, b) => a + b, 0)`
    adds (Python 3.12's `sum` compensates float rounding and can land on the other side of a
    tie)."""
    total = 0.0
    for value in values:
        total += value
    return total


def round_half_up(value: float) -> float:
    """Two decimals, ties up (JavaScript's `Math.round(x * 100) / 100`): `floor` plus an exact
    remainder test, since adding 0.5 in floating point rounds 0.49999999999999994 up."""
    scaled = value * 100
    whole = math.floor(scaled)
    return (whole + 1 if scaled - whole >= 0.5 else whole) / 100


_DOUBLE_EXACT = 2**53


def _as_double(value: int) -> Any:
    """An integer as JavaScript reads it from JSON: the nearest double (written as an integer),
    and null beyond the doubles' range (JavaScript's Infinity, which JSON writes as null)."""
    try:
        return int(float(value))
    except OverflowError:
        return None


def _canonical(value: Any, *, doubles: bool = False) -> str | None:
    """JSON text for comparing values (integral floats written as integers, as JavaScript
    writes them); None for an absent value. `doubles`: integers beyond 2**53 as doubles."""
    if value is None:
        return None

    def plain(v: Any) -> Any:
        if doubles and type(v) is int and abs(v) > _DOUBLE_EXACT:
            return _as_double(v)
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, dict):
            return {str(k): plain(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        return v

    try:
        return json.dumps(plain(value), ensure_ascii=False, default=str)
    except ValueError:  # a circular value
        return repr(value)


def _expected_type(expected: ExpectedStep, mastra_compat: bool) -> str | None:
    """The type an expected step asks for (the reference asks none where it was only inferred)."""
    return None if mastra_compat and expected.type_inferred else expected.type


def step_matches(actual: Step, expected: ExpectedStep, *, mastra_compat: bool = False) -> bool:
    """Same name; same type when the expected step names one; equal arguments when it gives
    them (a tool call's)."""
    if actual.name != expected.name:
        return False
    kind = _expected_type(expected, mastra_compat)
    if kind is None:
        return True
    if actual.type != kind:
        return False
    if kind == TOOL_CALL and expected.has_arguments:
        return actual.arguments is not None and \
            _canonical(actual.arguments, doubles=mastra_compat) == \
            _canonical(expected.arguments, doubles=mastra_compat)
    return True


def compare(run: Run, expected: tuple[ExpectedStep, ...], *, ordering: str = "relaxed",
            allow_repeated_steps: bool = True, mastra_compat: bool = False) -> dict[str, Any]:
    """How the run's steps match the expected steps: the score (matched / expected, less
    penalties) and the missing, extra, out-of-order and repeated step names."""
    actual = run.step_names
    if not expected:
        return _comparison(1.0 if not actual else 0.0, 0, 0, len(actual), [], actual, [], [])
    counts = Counter(actual)
    repeated = [name for name, count in counts.items() if count > 1]
    names = [e.name for e in expected]
    matched: set[int] = set()
    out_of_order: list[str] = []
    if ordering == "strict":
        for i in range(max(len(actual), len(expected))):
            name = actual[i] if i < len(actual) else None
            if i < len(expected) and name == names[i]:
                if step_matches(run.steps[i], expected[i], mastra_compat=mastra_compat):
                    matched.add(i)
            elif name is not None and name in names:
                out_of_order.append(name)
    elif ordering == "unordered":
        used: set[int] = set()
        for i, step in enumerate(expected):
            j = next((j for j, s in enumerate(run.steps) if j not in used
                      and step_matches(s, step, mastra_compat=mastra_compat)), None)
            if j is not None:
                matched.add(i)
                used.add(j)
    else:
        last = -1
        for i, step in enumerate(expected):
            j = next((j for j in range(last + 1, len(actual))
                      if actual[j] == step.name
                      and step_matches(run.steps[j], step, mastra_compat=mastra_compat)), None)
            if j is not None:
                matched.add(i)
                last = j
            elif step.name in actual:
                out_of_order.append(step.name)
    score = len(matched) / len(expected)
    if ordering == "strict" and len(actual) > len(expected):
        score = max(0.0, score - (len(actual) - len(expected)) / len(expected) * 0.5)
    if not allow_repeated_steps and repeated:
        score = max(0.0, score - len(repeated) * 0.1)
    extra = [name for name in actual if name not in set(names)]
    missing = [name for i, name in enumerate(names) if i not in matched]
    return _comparison(reference_round(max(0.0, min(1.0, score))), len(matched), len(expected),
                       len(actual), missing, extra, out_of_order, repeated)


def _comparison(score: float, matched: int, expected: int, actual: int, missing: list[str],
                extra: list[str], out_of_order: list[str], repeated: list[str]) -> dict[str, Any]:
    return {"score": score, "matched_steps": matched, "total_expected_steps": expected,
            "total_actual_steps": actual, "missing_steps": missing, "extra_steps": extra,
            "out_of_order_steps": out_of_order, "repeated_steps": repeated}


def _measured(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and value >= 0)


def efficiency(run: Run, *, max_steps: float | None = None, max_total_tokens: float | None = None,
               max_total_duration_ms: float | None = None,
               no_redundant_calls: bool = True, mastra_compat: bool = False) -> dict[str, Any]:
    """Step, token and time budgets and repeated identical tool calls; the score is the mean of
    the checks asked for (1 without any). Raises ValueError for a budget it cannot measure."""
    budgets = {"max_steps": max_steps, "max_total_tokens": max_total_tokens,
               "max_total_duration_ms": max_total_duration_ms}
    for key, limit in budgets.items():
        if limit is not None and not _measured(limit):
            raise ValueError(f"{key} must be a finite number >= 0, got {limit!r}")
    total_steps = len(run.steps)
    tokens, generations, pending = 0.0, 0, list(run.steps)
    while pending:
        step = pending.pop()
        if step.type == LLM_CALL:
            generations += 1
            if max_total_tokens is not None and not (_measured(step.input_tokens)
                                                     and _measured(step.output_tokens)):
                raise ValueError(f"cannot check the token budget: the LLM call {step.name!r} "
                                 f"has no token counts")
            tokens += (step.input_tokens or 0) + (step.output_tokens or 0)
        pending.extend(step.children)
    if max_total_tokens is not None and generations == 0:
        raise ValueError("cannot check the token budget: the run has no LLM calls")
    duration = run.duration_ms if run.duration_ms is not None else \
        js_sum(s.duration_ms or 0 for s in run.steps)
    if max_total_duration_ms is not None:
        timed = _measured(run.duration_ms) if run.duration_ms is not None else \
            bool(run.steps) and all(_measured(s.duration_ms) for s in run.steps)
        if not timed or not _measured(duration):
            raise ValueError("cannot check the duration budget: the run's steps have no timings")
    redundant = [{"name": b.name, "index": i} for i, (a, b) in
                 enumerate(zip(run.steps, run.steps[1:]), start=1)
                 if no_redundant_calls and a.name == b.name and a.type == b.type == TOOL_CALL
                 and _canonical(a.arguments, doubles=mastra_compat)
                 == _canonical(b.arguments, doubles=mastra_compat)]
    checks = []
    for used, limit in ((total_steps, max_steps), (tokens, max_total_tokens),
                        (duration, max_total_duration_ms)):
        if limit is not None:
            checks.append(_within(used, limit))
    if no_redundant_calls:
        checks.append(max(0.0, 1 - len(redundant) * 0.2))
    score = js_sum(checks) / len(checks) if checks else 1.0
    return {"score": reference_round(max(0.0, min(1.0, score))), "total_steps": total_steps,
            "over_step_budget": max_steps is not None and total_steps > max_steps,
            "total_tokens": tokens,
            "over_token_budget": max_total_tokens is not None and tokens > max_total_tokens,
            "total_duration_ms": duration,
            "over_duration_budget": max_total_duration_ms is not None
            and duration > max_total_duration_ms,
            "redundant_calls": redundant}


def _within(used: float, limit: float) -> float:
    if used <= limit:
        return 1.0
    return 0.0 if limit == 0 else max(0.0, 1 - (used - limit) / limit)


def blacklist(run: Run, tools: tuple[str, ...],
              sequences: tuple[tuple[str, ...], ...]) -> dict[str, Any]:
    """Forbidden tools the run called and forbidden sequences it took (score 0 if any)."""
    names = run.step_names
    tools_used = [t for t in tools if t in names]
    taken = [list(seq) for seq in sequences if seq and any(
        tuple(names[i:i + len(seq)]) == seq for i in range(len(names) - len(seq) + 1))]
    return {"score": 0.0 if tools_used or taken else 1.0, "violated_tools": tools_used,
            "violated_sequences": taken}


def tool_failures(run: Run, *, max_retries_per_tool: int = 2) -> dict[str, Any]:
    """Retries of failing tools (a call after a failed call of the same tool): each retry past
    `max_retries_per_tool` costs 0.2."""
    calls = [s for s in run.steps if s.type == TOOL_CALL]
    patterns: list[dict[str, Any]] = []
    i = 0
    while i < len(calls):
        j, retries = i + 1, 0
        while j < len(calls) and calls[j].name == calls[i].name:
            retries += not calls[j - 1].succeeded
            j += 1
        if retries:
            succeeded = calls[j - 1].succeeded
            fallback = calls[j].name if j < len(calls) and not succeeded else None
            patterns.append({"tool_name": calls[i].name, "retry_count": retries,
                             "fell_back_to_alternative": fallback is not None,
                             "alternative_tool": fallback, "eventually_succeeded": succeeded})
        i = j
    excess = sum(max(0, p["retry_count"] - max_retries_per_tool) for p in patterns)
    return {"score": reference_round(max(0.0, min(1.0, 1 - excess * 0.2))), "patterns": patterns,
            "total_retries": sum(p["retry_count"] for p in patterns),
            "excessive_retry_tools": [p["tool_name"] for p in patterns
                                      if p["retry_count"] > max_retries_per_tool]}


def evaluate(run: Run, config: Expectation, weights: dict[str, float], *,
             mastra_compat: bool = False) -> dict[str, Any]:
    """Every dimension the expectation asks for, nested expectations included, and the score."""
    steps = config.steps
    accuracy = None if steps is None else compare(
        run, steps, ordering=config.ordering, allow_repeated_steps=config.allow_repeated_steps,
        mastra_compat=mastra_compat)
    budgeted = (config.max_steps, config.max_total_tokens, config.max_total_duration_ms,
                config.no_redundant_calls)
    eff = None if all(b is None for b in budgeted) else efficiency(
        run, max_steps=config.max_steps, max_total_tokens=config.max_total_tokens,
        max_total_duration_ms=config.max_total_duration_ms,
        no_redundant_calls=config.no_redundant_calls is not False, mastra_compat=mastra_compat)
    black = blacklist(run, config.blacklisted_tools, config.blacklisted_sequences) \
        if config.blacklisted_tools or config.blacklisted_sequences else None
    failures = tool_failures(run, max_retries_per_tool=config.max_retries_per_tool)
    nested = _nested(steps, run, weights, mastra_compat) if steps else []
    parts = [(weights["accuracy"], accuracy), (weights["efficiency"], eff),
             (weights["tool_failures"], failures if failures["patterns"] else None),
             (weights["blacklist"], black)]
    scored = [(w, d["score"]) for w, d in parts if d is not None]
    if black is not None and black["score"] == 0 or blacklisted(nested):
        score = 0.0
    else:
        total = js_sum(w for w, _ in scored)
        score = js_sum(w / total * v for w, v in scored) if scored and total > 0 else 1.0
        if nested:
            score = 0.7 * score + 0.3 * (js_sum(n["score"] for n in nested) / len(nested))
        score = round_half_up(score)
    return {"score": score, "accuracy": accuracy, "efficiency": eff, "blacklist": black,
            "tool_failures": failures, "nested": nested or None}


def blacklisted(results: list[dict[str, Any]]) -> bool:
    """Whether a nested result (at any depth) broke its blacklist."""
    return any((r["blacklist"] or {}).get("score") == 0 or blacklisted(r["nested"] or [])
               for r in results)


def _nested(expected: tuple[ExpectedStep, ...], run: Run, weights: dict[str, float],
            mastra_compat: bool) -> list[dict[str, Any]]:
    """Each expected step with expectations for its own steps, checked against the first
    unmatched run step of its name (and type)."""
    results: list[dict[str, Any]] = []
    used: set[int] = set()
    for step in expected:
        if step.children is None:
            continue
        kind = _expected_type(step, mastra_compat)
        index = next((i for i, s in enumerate(run.steps) if i not in used and s.name == step.name
                      and (kind is None or s.type == kind)), None)
        if index is None:
            child_steps = step.children.steps or ()
            accuracy = _comparison(0.0, 0, len(child_steps), 0, [s.name for s in child_steps],
                                   [], [], []) if child_steps else None
            results.append({"step_name": step.name, "score": 0.0, "accuracy": accuracy,
                            "efficiency": None, "blacklist": None, "tool_failures": None,
                            "nested": None})
            continue
        used.add(index)
        actual = run.steps[index]
        child = evaluate(Run(steps=actual.children, duration_ms=actual.duration_ms),
                         step.children, weights, mastra_compat=mastra_compat)
        results.append({"step_name": step.name, **child})
    return results
