"""Score results as OpenTelemetry event payloads: one `gen_ai.evaluation.result` plus judge steps.

Shared by every sink (span events, carrier spans, log records) and by offline evals.
Scores, labels and usage are always emitted; prompts, step results and explanations follow the
content-capture and redaction rules of `tracescore._content`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry.util.types import AttributeValue

from tracescore import _semconv as sc
from tracescore._exceptions import ScorerError

if TYPE_CHECKING:
    from tracescore.scoring import ScoreResult

Attributes = dict[str, AttributeValue]
EventPayload = tuple[str, Attributes]

# (step name, prompt field, result field) of a ScoreResult, in pipeline order
_STEPS: tuple[tuple[str, str, str], ...] = (
    ("preprocess", "preprocess_prompt", "preprocess_step_result"),
    ("analyze", "analyze_prompt", "analyze_step_result"),
    ("reason", "generate_reason_prompt", "reason"),
)


def evaluation_events(
    result: ScoreResult | None,
    *,
    scorer_id: str,
    scorer_name: str,
    error: BaseException | None = None,
    sampling_rate: float | None = None,
    capture_content: bool | None = None,
    run_id: str | None = None,
    scorer_version: str | None = None,
    judge_model: str | None = None,
) -> list[EventPayload]:
    """Events describing one scorer run: the result event first, then one event per judge step.

    Pass `result` for a finished run, or `error` (and optionally the `run_id` it was given) for
    a failed one; a failure yields a result event with `error.type` and no score. The scorer's
    `scorer_version` and `judge_model` (its provenance) go on the result event. Never raises
    for odd values inside the result (they are serialized safely).
    """
    from tracescore._content import capture_enabled

    capture = capture_enabled(capture_content)
    attrs: Attributes = {sc.GEN_AI_EVALUATION_NAME: scorer_name, sc.TS_SCORER_ID: scorer_id}
    _put(attrs, sc.TS_SCORER_VERSION, scorer_version)
    _put(attrs, sc.TS_JUDGE_MODEL, judge_model)  # the usage's model, when the judge ran, wins
    if sampling_rate is not None:
        attrs[sc.TS_SAMPLING_RATE] = float(sampling_rate)
    events: list[EventPayload] = [(sc.GEN_AI_EVALUATION_RESULT, attrs)]

    if result is not None:
        attrs[sc.GEN_AI_EVALUATION_SCORE_VALUE] = float(result.score)
        if result.label is not None:
            attrs[sc.GEN_AI_EVALUATION_SCORE_LABEL] = _name(str(result.label))
        _put(attrs, sc.TS_RUN_ID, result.run_id or run_id)
        if capture and result.reason:
            attrs[sc.GEN_AI_EVALUATION_EXPLANATION] = _text(result.reason)
        attrs.update(usage_attributes(result.usage))
        if getattr(result, "judge_input_truncated", False):
            attrs[sc.TS_JUDGE_INPUT_TRUNCATED] = True
        if capture:
            events.extend(_step_events(scorer_id, lambda field: getattr(result, field, None)))
        return events

    _put(attrs, sc.TS_RUN_ID, run_id)
    if error is not None:
        attrs[sc.ERROR_TYPE] = error_type(error)
        step = getattr(error, "step", None)  # ScorerError, JudgeStepError (auth failures)
        if isinstance(step, str):
            attrs[sc.TS_FAILED_STEP] = step
        if capture:
            attrs[sc.GEN_AI_EVALUATION_EXPLANATION] = _text(error_message(error))
            events.extend(_failure_step_events(scorer_id, error))
    return events


def unscored_event(*, scorer_id: str, scorer_name: str, reason: str,
                   sampling_rate: float | None = None) -> EventPayload:
    """The event put on a span exported without its score (`reason`: timeout, queue_full, ...)."""
    attrs: Attributes = {
        sc.GEN_AI_EVALUATION_NAME: scorer_name,
        sc.TS_SCORER_ID: scorer_id,
        sc.TS_UNSCORED_REASON: reason,
    }
    if sampling_rate is not None:
        attrs[sc.TS_SAMPLING_RATE] = float(sampling_rate)
    return sc.TS_UNSCORED, attrs


def usage_attributes(usage: Any) -> Attributes:
    """Judge usage (model, calls, tokens, cost, latency) as `tracescore.judge.*` attributes."""
    attrs: Attributes = {}
    if usage is None:
        return attrs
    _put(attrs, sc.TS_JUDGE_MODEL, getattr(usage, "model", None))
    for key, field in (
        (sc.TS_JUDGE_CALLS, "calls"),
        (sc.TS_JUDGE_INPUT_TOKENS, "input_tokens"),
        (sc.TS_JUDGE_OUTPUT_TOKENS, "output_tokens"),
    ):
        value = getattr(usage, field, None)
        if isinstance(value, int) and not isinstance(value, bool):
            attrs[key] = value
    for key, field in ((sc.TS_JUDGE_COST_USD, "cost_usd"), (sc.TS_JUDGE_LATENCY_MS, "latency_ms")):
        value = getattr(usage, field, None)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            attrs[key] = float(value)
    return attrs


def error_type(error: BaseException) -> str:
    """Low-cardinality `error.type` of a failed run: the exception's class name."""
    return type(error).__qualname__


def _step_events(scorer_id: str, get: Any) -> list[EventPayload]:
    events: list[EventPayload] = []
    for step, prompt_field, result_field in _STEPS:
        prompt, value = get(prompt_field), get(result_field)
        if prompt is None and (value is None or step == "reason"):
            continue  # a reason without a judge prompt is already the explanation
        attrs: Attributes = {sc.TS_SCORER_ID: scorer_id, sc.TS_STEP_NAME: step}
        if prompt is not None:
            attrs[sc.TS_STEP_PROMPT] = _text(prompt)
        if value is not None:
            attrs[sc.TS_STEP_RESULT] = _text(value)
        events.append((sc.TS_EVALUATION_STEP, attrs))
    return events


def _failure_step_events(scorer_id: str, error: BaseException) -> list[EventPayload]:
    """Completed steps of a failed run (from `ScorerError.partial`) plus the failing step's reply."""
    if not isinstance(error, ScorerError):
        return []
    partial = error.partial if isinstance(error.partial, Mapping) else {}
    events = _step_events(scorer_id, partial.get)
    attrs: Attributes = {
        sc.TS_SCORER_ID: scorer_id,
        sc.TS_STEP_NAME: error.step,
        sc.ERROR_TYPE: error_type(error.__cause__ or error),
    }
    if error.raw_reply is not None:
        attrs[sc.TS_STEP_RESULT] = _text(error.raw_reply)
    events.append((sc.TS_EVALUATION_STEP, attrs))
    return events


def error_message(error: BaseException) -> str:
    """The error's message, or its class name when it has none (or cannot be printed)."""
    try:
        return str(error) or type(error).__name__
    except Exception:  # noqa: BLE001 - a broken __str__ must not cost the failure event
        return type(error).__name__


def _text(value: object) -> str:
    from tracescore._content import serialize

    return serialize(value)


def _put(attrs: Attributes, key: str, value: object) -> None:
    if value is not None:
        attrs[key] = _name(str(value))


def _name(text: str) -> str:
    from tracescore._content import cap_name

    return cap_name(text)
