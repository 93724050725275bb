"""Code checks: small deterministic scorers over a call or a run (no judge), the reference
system's "quick checks" (`checks.*` of @mastra/evals 1.10.2), each scoring 1 or 0 (similarity:
the Dice similarity itself unless given a threshold).

    create_called_tool_check(tool_name="get_weather", times=2)
    create_includes_check(expected="sunny")

Scope "call" (default) reads the call's tool calls (else those in its output) and its output;
scope "run" reads every tool call of the whole run (sub-agents' included). The output text is
every assistant message of the output joined (by a space for includes, excludes and
similarity, by nothing for equals and matches, as the reference joins them).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from tracescore._exceptions import ConfigurationError, ScorerError
from tracescore.scoring._base import STEP_PREPROCESS, ScoreResult, ScorerInput, new_run_id
from tracescore.scoring._code import NO_JUDGE
from tracescore.scoring._inputs import InputError, answer_text
from tracescore.scoring._runs import TOOL_CALL, Step
from tracescore.scoring._scoped import ScopedScorer

CHECK_SCOPES = ("call", "run")
_FLAGS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL}


def output_text(output: Any, separator: str) -> str:
    """The text of every assistant message of `output` joined by `separator` (the text itself
    for a string or a single answer)."""
    if isinstance(output, Sequence) and not isinstance(output, str) and output and \
            all(isinstance(m, Mapping) and "role" in m for m in output):
        return separator.join(answer_text([m]) for m in output if m.get("role") == "assistant")
    return answer_text(output)


def _flat(steps: Sequence[Step]) -> list[Step]:
    out: list[Step] = []
    for step in steps:
        if step.type == TOOL_CALL:
            out.append(step)
        out += _flat(step.children)
    return out


class CheckScorer(ScopedScorer):
    """What the checks share: the scope, the tool calls and output text they read, and a
    result of 1 (passed) or 0."""

    uses_judge = False
    separator: ClassVar[str] = " "

    def __init__(self, *, scope: str = "call") -> None:
        if scope not in CHECK_SCOPES:
            raise ConfigurationError(f"scope must be one of {', '.join(CHECK_SCOPES)}, "
                                     f"got {scope!r}")
        self.scope = scope

    def __repr__(self) -> str:
        options = {k: v for k, v in vars(self).items() if not k.startswith("_")}
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in options.items())})"

    def tool_calls(self, call: ScorerInput) -> list[tuple[str, bool]]:
        """(name, failed) of each tool call the check reads, in call order."""
        if self.scope == "run":
            return [(s.name, s.error is not None) for s in _flat(call.trajectory.steps)]
        if call.tool_calls:
            return [(c.name, c.error is not None) for c in call.tool_calls]
        from tracescore.scoring.tools import tool_call_names  # (declares its scorer after ours)

        return [(name, False) for name in tool_call_names(call.output)]

    def check(self, call: ScorerInput) -> tuple[float, dict[str, Any]]:
        """(score, preprocess step result) of one call."""
        raise NotImplementedError

    async def evaluate(self, call: ScorerInput) -> ScoreResult:
        run_id = call.run_id or new_run_id()
        try:
            score, step = self.check(call)
        except InputError as exc:
            raise ScorerError(str(exc), scorer_id=self.id, step=STEP_PREPROCESS,
                              partial={"run_id": run_id}) from exc
        passed = step.get("passed", score >= 1)
        return ScoreResult(run_id=run_id, scorer_id=self.id, scorer_name=self.name,
                           score=float(score), label="pass" if passed else "fail",
                           reason=f"{self.name}: {'passed' if passed else 'failed'}.",
                           preprocess_step_result=step, usage=NO_JUDGE)


def _text_option(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ConfigurationError(f"{name} must be a string, got {value!r}")
    return value


def _bool_option(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigurationError(f"{name} must be true or false, got {value!r}")
    return value


def _count_option(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigurationError(f"{name} must be an integer >= 0, got {value!r}")
    return value


class _TextCheck(CheckScorer):
    def __init__(self, *, expected: str, ignore_case: bool = True, scope: str = "call") -> None:
        super().__init__(scope=scope)
        self.expected = _text_option("expected", expected)
        self.ignore_case = _bool_option("ignore_case", ignore_case)

    def texts(self, call: ScorerInput) -> tuple[str, str]:
        output, target = output_text(call.output, self.separator), self.expected
        if self.ignore_case:
            output, target = output.lower(), target.lower()
        return output, target


class IncludesCheck(_TextCheck):
    """1 when the output contains `expected`."""

    id = "check-includes"
    name = "Includes Check"
    factory = "create_includes_check"

    def check(self, call: ScorerInput) -> tuple[float, dict[str, Any]]:
        output, target = self.texts(call)
        found = target in output
        return float(found), {"output": output, "target": target, "found": found,
                              "passed": found}


class ExcludesCheck(_TextCheck):
    """1 when the output does not contain `expected` (the unwanted text)."""

    id = "check-excludes"
    name = "Excludes Check"
    factory = "create_excludes_check"

    def check(self, call: ScorerInput) -> tuple[float, dict[str, Any]]:
        output, target = self.texts(call)
        excluded = target not in output
        return float(excluded), {"output": output, "target": target, "excluded": excluded,
                                 "passed": excluded}


class EqualsCheck(_TextCheck):
    """1 when the output equals `expected`."""

    id = "check-equals"
    name = "Equals Check"
    factory = "create_equals_check"
    separator = ""

    def check(self, call: ScorerInput) -> tuple[float, dict[str, Any]]:
        output, target = self.texts(call)
        return float(output == target), {"output": output, "target": target,
                                         "is_equal": output == target, "passed": output == target}


class MatchesCheck(CheckScorer):
    """1 when the output matches the regular expression `pattern` (anywhere; with `exact`,
    the whole output). `flags`: any of "i", "m", "s"."""

    id = "check-matches"
    name = "Matches Check"
    factory = "create_matches_check"
    separator = ""

    def __init__(self, *, pattern: str, flags: str = "", exact: bool = False,
                 scope: str = "call") -> None:
        super().__init__(scope=scope)
        self.pattern = _text_option("pattern", pattern)
        self.flags = _text_option("flags", flags)
        self.exact = _bool_option("exact", exact)
        unknown = sorted(set(flags) - set(_FLAGS))
        if unknown:
            raise ConfigurationError(f"flags: unknown flag {unknown[0]!r}; use i, m or s")
        bits = 0
        for flag in flags:
            bits |= _FLAGS[flag]
        try:
            self._regex = re.compile(f"^(?:{pattern})$" if exact else pattern, bits)
        except re.error as exc:
            raise ConfigurationError(f"pattern {pattern!r} is not a regular expression: {exc}"
                                     ) from None

    def check(self, call: ScorerInput) -> tuple[float, dict[str, Any]]:
        output = output_text(call.output, self.separator)
        matched = self._regex.search(output) is not None
        return float(matched), {"output": output, "pattern": self.pattern, "matched": matched,
                                "passed": matched}


class SimilarityCheck(_TextCheck):
    """The Dice similarity of the output and `expected` (0..1); with `threshold`, 1 when the
    similarity reaches it, else 0."""

    id = "check-similarity"
    name = "Similarity Check"
    factory = "create_similarity_check"

    def __init__(self, *, expected: str, ignore_case: bool = True,
                 threshold: float | None = None, scope: str = "call") -> None:
        super().__init__(expected=expected, ignore_case=ignore_case, scope=scope)
        if threshold is not None and (isinstance(threshold, bool)
                                      or not isinstance(threshold, (int, float))):
            raise ConfigurationError(f"threshold must be a number, got {threshold!r}")
        self.threshold = threshold

    def check(self, call: ScorerInput) -> tuple[float, dict[str, Any]]:
        from tracescore.scoring.similarity import dice_similarity  # (declares after ours)

        output, target = self.texts(call)
        similarity = dice_similarity(output, target)
        score = similarity if self.threshold is None else float(similarity >= self.threshold)
        passed = score >= 1 if self.threshold is None else bool(score)
        return score, {"output": output, "target": target, "score": similarity,
                       "threshold": self.threshold, "passed": passed}


class CalledToolCheck(CheckScorer):
    """1 when `tool_name` was called at least `times` times."""

    id = "check-called-tool"
    name = "Called Tool Check"
    factory = "create_called_tool_check"

    def __init__(self, *, tool_name: str, times: int = 1, scope: str = "call") -> None:
        super().__init__(scope=scope)
        self.tool_name = _text_option("tool_name", tool_name)
        self.times = _count_option("times", times)

    def check(self, call: ScorerInput) -> tuple[float, dict[str, Any]]:
        count = sum(name == self.tool_name for name, _ in self.tool_calls(call))
        passed = count >= self.times
        return float(passed), {"tool_name": self.tool_name, "expected_times": self.times,
                               "actual_count": count, "passed": passed}


class DidNotCallCheck(CheckScorer):
    """1 when `tool_name` was never called."""

    id = "check-did-not-call"
    name = "Did Not Call Check"
    factory = "create_did_not_call_check"

    def __init__(self, *, tool_name: str, scope: str = "call") -> None:
        super().__init__(scope=scope)
        self.tool_name = _text_option("tool_name", tool_name)

    def check(self, call: ScorerInput) -> tuple[float, dict[str, Any]]:
        count = sum(name == self.tool_name for name, _ in self.tool_calls(call))
        return float(count == 0), {"tool_name": self.tool_name, "count": count,
                                   "passed": count == 0}


class ToolOrderCheck(CheckScorer):
    """1 when the tools of `expected_order` were called in that order (other calls may come
    between; an empty order always passes)."""

    id = "check-tool-order"
    name = "Tool Order Check"
    factory = "create_tool_order_check"

    def __init__(self, *, expected_order: Sequence[str], scope: str = "call") -> None:
        super().__init__(scope=scope)
        if isinstance(expected_order, str) or not isinstance(expected_order, Sequence) or \
                not all(isinstance(n, str) for n in expected_order):
            raise ConfigurationError(f"expected_order must be a list of tool names, "
                                     f"got {expected_order!r}")
        self.expected_order = list(expected_order)

    def check(self, call: ScorerInput) -> tuple[float, dict[str, Any]]:
        tools = [name for name, _ in self.tool_calls(call)]
        reached = 0
        for name in tools:
            if reached < len(self.expected_order) and name == self.expected_order[reached]:
                reached += 1
        passed = reached == len(self.expected_order)
        return float(passed), {"actual_tools": tools, "expected_order": self.expected_order,
                               "passed": passed}


class MaxToolCallsCheck(CheckScorer):
    """1 when at most `max` tool calls were made."""

    id = "check-max-tool-calls"
    name = "Max Tool Calls Check"
    factory = "create_max_tool_calls_check"

    def __init__(self, *, max: int, scope: str = "call") -> None:
        super().__init__(scope=scope)
        self.max = _count_option("max", max)

    def check(self, call: ScorerInput) -> tuple[float, dict[str, Any]]:
        count = len(self.tool_calls(call))
        return float(count <= self.max), {"count": count, "max": self.max,
                                          "passed": count <= self.max}


class UsedNoToolsCheck(CheckScorer):
    """1 when no tool was called."""

    id = "check-used-no-tools"
    name = "Used No Tools Check"
    factory = "create_used_no_tools_check"

    def check(self, call: ScorerInput) -> tuple[float, dict[str, Any]]:
        count = len(self.tool_calls(call))
        return float(count == 0), {"count": count, "passed": count == 0}


class NoToolErrorsCheck(CheckScorer):
    """1 when no tool call failed."""

    id = "check-no-tool-errors"
    name = "No Tool Errors Check"
    factory = "create_no_tool_errors_check"

    def check(self, call: ScorerInput) -> tuple[float, dict[str, Any]]:
        calls = self.tool_calls(call)
        errors = sum(failed for _, failed in calls)
        return float(errors == 0), {"error_count": errors, "total_calls": len(calls),
                                    "passed": errors == 0}


def create_includes_check(*, expected: str, ignore_case: bool = True,
                          scope: str = "call") -> IncludesCheck:
    """The reference's `checks.includes(expected, {ignoreCase})`."""
    return IncludesCheck(expected=expected, ignore_case=ignore_case, scope=scope)


def create_excludes_check(*, expected: str, ignore_case: bool = True,
                          scope: str = "call") -> ExcludesCheck:
    """The reference's `checks.excludes(unwanted, {ignoreCase})`."""
    return ExcludesCheck(expected=expected, ignore_case=ignore_case, scope=scope)


def create_equals_check(*, expected: str, ignore_case: bool = True,
                        scope: str = "call") -> EqualsCheck:
    """The reference's `checks.equals(expected, {ignoreCase})`."""
    return EqualsCheck(expected=expected, ignore_case=ignore_case, scope=scope)


def create_matches_check(*, pattern: str, flags: str = "", exact: bool = False,
                         scope: str = "call") -> MatchesCheck:
    """The reference's `checks.matches(/pattern/flags, {exact})` (a Python regular
    expression)."""
    return MatchesCheck(pattern=pattern, flags=flags, exact=exact, scope=scope)


def create_similarity_check(*, expected: str, ignore_case: bool = True,
                            threshold: float | None = None,
                            scope: str = "call") -> SimilarityCheck:
    """The reference's `checks.similarity(expected, {ignoreCase, threshold})`."""
    return SimilarityCheck(expected=expected, ignore_case=ignore_case, threshold=threshold,
                           scope=scope)


def create_called_tool_check(*, tool_name: str, times: int = 1,
                             scope: str = "call") -> CalledToolCheck:
    """The reference's `checks.calledTool(toolName, {times})`."""
    return CalledToolCheck(tool_name=tool_name, times=times, scope=scope)


def create_did_not_call_check(*, tool_name: str, scope: str = "call") -> DidNotCallCheck:
    """The reference's `checks.didNotCall(toolName)`."""
    return DidNotCallCheck(tool_name=tool_name, scope=scope)


def create_tool_order_check(*, expected_order: Sequence[str],
                            scope: str = "call") -> ToolOrderCheck:
    """The reference's `checks.toolOrder(expectedOrder)`."""
    return ToolOrderCheck(expected_order=expected_order, scope=scope)


def create_max_tool_calls_check(*, max: int, scope: str = "call") -> MaxToolCallsCheck:
    """The reference's `checks.maxToolCalls(max)`."""
    return MaxToolCallsCheck(max=max, scope=scope)


def create_used_no_tools_check(*, scope: str = "call") -> UsedNoToolsCheck:
    """The reference's `checks.usedNoTools()`."""
    return UsedNoToolsCheck(scope=scope)


def create_no_tool_errors_check(*, scope: str = "call") -> NoToolErrorsCheck:
    """The reference's `checks.noToolErrors()`."""
    return NoToolErrorsCheck(scope=scope)
