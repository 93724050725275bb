"""The one exception hierarchy of tracescore: every public error is defined here.

    TracescoreError            base of everything we raise on purpose
    ├── ConfigurationError     bad arguments or settings, raised at configuration time (ValueError)
    ├── SetupError             a `module:attribute` target that cannot be loaded or used
    ├── DatasetError           a dataset file that cannot be used; names the file and line
    ├── InputError             a scorer's input or output holds no usable text (ValueError)
    ├── OtlpJsonError          text that is not OTLP/JSON; says what is wrong in one line (ValueError)
    ├── CollectorBuildError    tracescore.testing could not build the Collector (RuntimeError)
    ├── JudgeError             a judge call failed for good (after its retries)
    │   └── JudgeStepError     ... at one scorer step (tracescore.scoring)
    │       └── JudgeAuthenticationError   the judge's API key is missing or refused
    └── ScorerError            a scorer step failed; names scorer + step, carries the partial result

Each is importable from `tracescore` (its `__module__`, so tracebacks, pickles and `error.type`
name the public path) and also from where it was first defined (`tracescore.scoring`, ...). Telemetry
paths (decorators, processors, online scoring) never raise these into user code: they log once
and record the failure as data.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # a type only: this module imports nothing of tracescore at run time
    from tracescore.scoring._base import JudgeUsage


class TracescoreError(Exception):
    """Base class of every error tracescore raises on purpose."""


class ConfigurationError(TracescoreError, ValueError):
    """Invalid configuration, detected when it is given (never on a hot path)."""


class SetupError(TracescoreError):
    """An option that cannot be turned into a working object; the message says why."""


class DatasetError(TracescoreError):
    """A dataset file that cannot be used; the message names the file and, where known, the line."""


class InputError(TracescoreError, ValueError):
    """The value holds no usable text; the message says what was found instead."""


class OtlpJsonError(TracescoreError, ValueError):
    """The text is not OTLP/JSON; the message says what is wrong, in one line."""


class CollectorBuildError(TracescoreError, RuntimeError):
    """The collector could not be built (no Go toolchain, module download or compile failure)."""


class JudgeError(TracescoreError):
    """A judge call failed after its retries (transport, HTTP status, or invalid reply)."""

    def __init__(self, message: str, *, model: str | None = None, raw_reply: str | None = None,
                 retryable: bool = False) -> None:
        super().__init__(message)
        self.model = model
        self.raw_reply = raw_reply
        self.retryable = retryable


class JudgeStepError(JudgeError):
    """A judge step failed for good; carries the step name and the usage spent on it."""

    def __init__(self, message: str, *, step: str, model: str | None, usage: JudgeUsage,
                 raw_reply: str | None = None, retryable: bool = False,
                 prompt: str | None = None) -> None:
        super().__init__(f"judge {model!r} failed at step {step!r}: {message}", model=model,
                         raw_reply=raw_reply, retryable=retryable)
        self.step = step
        self.usage = usage
        self.prompt = prompt


class JudgeAuthenticationError(JudgeStepError):
    """The judge's API key is missing, invalid or refused (never retried).

    Every run would fail the same way, so scorers raise it as it is rather than as a
    `ScorerError` of one step.
    """


class ScorerError(TracescoreError):
    """A scorer step failed. `partial` holds the completed steps and the raw judge reply."""

    def __init__(self, message: str, *, scorer_id: str, step: str,
                 partial: dict[str, Any] | None = None, raw_reply: str | None = None) -> None:
        super().__init__(f"scorer {scorer_id!r} failed at step {step!r}: {message}")
        self.scorer_id = scorer_id
        self.step = step
        self.partial = partial or {}
        self.raw_reply = raw_reply


for _error in (TracescoreError, ConfigurationError, SetupError, DatasetError, InputError,
               OtlpJsonError, CollectorBuildError, JudgeError, JudgeStepError,
               JudgeAuthenticationError, ScorerError):
    _error.__module__ = "tracescore"  # the public home: `tracescore.<Name>`
del _error
