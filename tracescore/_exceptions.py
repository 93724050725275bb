"""The one exception hierarchy of tracescore.

    TracescoreError            base of everything we raise on purpose
    ├── ConfigurationError     bad arguments or settings, raised at configuration time
    ├── JudgeError             a judge call failed for good (after its retries)
    │   └── JudgeStepError     ... at one scorer step (tracescore.scoring)
    │       └── JudgeAuthenticationError   the judge's API key is missing or refused
    └── ScorerError            a scorer step failed; names scorer + step, carries the partial result

Telemetry paths (decorators, processors, online scoring) never raise these into user code:
they log once and record the failure as data.
"""

from __future__ import annotations

from typing import Any


class TracescoreError(Exception):
    """Base class of every error tracescore raises on purpose."""


class ConfigurationError(TracescoreError, ValueError):
    """Invalid configuration, detected when it is given (never on a hot path)."""


class JudgeError(TracescoreError):
    """A judge call failed after its retries (transport, HTTP status, or invalid reply)."""

    def __init__(self, message: str, *, model: str | None = None, raw_reply: str | None = None,
                 retryable: bool = False) -> None:
        super().__init__(message)
        self.model = model
        self.raw_reply = raw_reply
        self.retryable = retryable


class ScorerError(TracescoreError):
    """A scorer step failed. `partial` holds the completed steps and the raw judge reply."""

    def __init__(self, message: str, *, scorer_id: str, step: str,
                 partial: dict[str, Any] | None = None, raw_reply: str | None = None) -> None:
        super().__init__(f"scorer {scorer_id!r} failed at step {step!r}: {message}")
        self.scorer_id = scorer_id
        self.step = step
        self.partial = partial or {}
        self.raw_reply = raw_reply
