"""What one judge reply cost, as litellm prices it, without pricing it twice.

`litellm.acompletion` prices a reply while it returns it (`_hidden_params["response_cost"]`);
a reply from litellm's HTTP handler (`_litellm_direct`) is not priced yet, and is priced here
from its token counts with litellm's prices for the judge's model. When litellm cannot price a
model (one missing from its price map, e.g. a self-hosted one), pricing it again fails the same
way, after a search through the whole price map: a few milliseconds of CPU on every call. So a
model whose reply could not be priced once is not priced again in this process (the cost stays
unknown, as before).
"""

from __future__ import annotations

from typing import Any

from tracescore._litellm_support import quiet_litellm

_MAX_UNPRICED = 256  # models remembered (a process judges with a handful)
_unpriced: set[str] = set()


def reply_cost(litellm: Any, model: str, response: Any) -> float | None:
    """The cost in USD of `response` from `model`, or None when litellm cannot price it."""
    hidden = getattr(response, "_hidden_params", None)
    cost = hidden.get("response_cost") if isinstance(hidden, dict) else None
    if isinstance(cost, (int, float)) and not isinstance(cost, bool):
        return float(cost)
    if model in _unpriced:
        return None
    usage = getattr(response, "usage", None)
    try:
        with quiet_litellm():  # an unmapped model makes litellm print a provider banner
            prompt, completion = litellm.cost_per_token(
                model=model, prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
                completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0))
        return float(prompt) + float(completion)
    except Exception:  # noqa: BLE001 - litellm raises plain Exception for unmapped models
        if len(_unpriced) < _MAX_UNPRICED:
            _unpriced.add(model)
        return None
