"""The judge interface: what a scorer step asks a judge (`JudgeRequest`), what it gets back
(`JudgeReply`), the `Judge` protocol and its errors.

The LiteLLM judge (`_litellm_judge`) and the offline judge (`_offline`) implement it and import
only this module, never each other; `_resolve` picks one from a model string.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from tracescore._exceptions import JudgeAuthenticationError, JudgeStepError
from tracescore.scoring._base import JudgeUsage

__all__ = ["OFFLINE_MODEL", "Judge", "JudgeAuthenticationError", "JudgeReply", "JudgeRequest",
           "JudgeStepError"]

OFFLINE_MODEL = "tracescore/offline"  # the model name of the offline judge


@dataclass(frozen=True, kw_only=True)
class JudgeRequest:
    """One scorer step for the judge: the prompts to send and the reply schema expected.

    `data` carries the step's inputs as structured values, for judges that do not read
    prompts (the offline judge); `task` names what the step asks for. `reference` is the
    caller's ground truth, offered as background knowledge to judges that have none of their
    own (the offline judge); it is never part of the prompts, so LLM judges are sent exactly
    what the reference system sends.
    """

    step: str
    task: str
    system: str
    prompt: str
    schema_name: str
    schema: dict[str, Any]
    validate: Callable[[Any], dict[str, Any]]
    data: Mapping[str, Any] = field(default_factory=dict)
    reference: str | None = None


@dataclass(frozen=True, kw_only=True)
class JudgeReply:
    """A validated judge reply with the raw text it came from and what it cost.

    `notes` are facts about how the judge reached the reply that the scorer records in the
    step result (the offline judge: that it used the ground truth as reference knowledge).
    """

    data: dict[str, Any]
    raw: str
    usage: JudgeUsage
    prompt: str  # the user prompt finally sent (the fallback prompt when the fallback ran)
    notes: Mapping[str, Any] = field(default_factory=dict)


@runtime_checkable
class Judge(Protocol):
    """Anything that can answer a JudgeRequest: `model` names it in results and spans."""

    model: str

    async def judge(self, request: JudgeRequest) -> JudgeReply:
        """Answer one step; raise JudgeStepError when no valid reply can be had."""
        ...
