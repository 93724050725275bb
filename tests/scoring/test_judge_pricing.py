"""A judge reply's cost comes from litellm's prices; a model litellm cannot price is not looked
up again on every call (that search costs milliseconds of CPU per judge call)."""

from __future__ import annotations

import sys
import uuid
from typing import Any

import pytest

from tracescore import AnswerRelevancyScorer
from tracescore.scoring import _judge_pricing
from tracescore.testing import StubLLMServer


def _score(stub: StubLLMServer, model: str, **options: Any) -> Any:
    stub.enqueue({"statements": ["Paris is the capital of France."]})
    stub.enqueue({"results": [{"result": "yes", "reason": "answers it"}]})
    stub.enqueue({"reason": "The score is 1 because it answers the question."})
    scorer = AnswerRelevancyScorer(model=model, api_base=stub.base_url, api_key="sk-test",
                                   **options)
    return scorer.run(input="Capital of France?", output="Paris.")


@pytest.fixture
def our_lookups(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The pricing lookups the judge makes itself (litellm's own are not counted)."""
    import litellm

    made: list[str] = []
    real = litellm.cost_per_token

    def counted(*args: Any, **kwargs: Any) -> Any:
        if sys._getframe(1).f_globals.get("__name__") == _judge_pricing.__name__:
            made.append("lookup")
        return real(*args, **kwargs)

    monkeypatch.setattr(litellm, "cost_per_token", counted)
    return made


@pytest.mark.parametrize("through_acompletion", [False, True])
def test_a_model_litellm_cannot_price_is_looked_up_once(
        stub_llm: StubLLMServer, our_lookups: list[str], through_acompletion: bool) -> None:
    model = f"openai/self-hosted-{uuid.uuid4().hex[:8]}"  # new to this process
    for _ in range(3):
        result = _score(stub_llm, model, through_acompletion=through_acompletion)
        assert result.score == 1.0 and result.usage.cost_usd is None  # unknown, never 0
    assert our_lookups == ["lookup"]  # 9 judge calls, one lookup


def test_a_priced_model_costs_the_same_on_either_route(stub_llm: StubLLMServer,
                                                      our_lookups: list[str]) -> None:
    direct = _score(stub_llm, "openai/gpt-4o-mini")
    assert our_lookups == ["lookup"] * 3  # litellm's HTTP handler does not price: one each
    through = _score(stub_llm, "openai/gpt-4o-mini", through_acompletion=True)
    assert our_lookups == ["lookup"] * 3  # acompletion priced them: no lookup of ours
    assert direct.usage.calls == through.usage.calls == 3
    assert direct.usage.cost_usd is not None and direct.usage.cost_usd > 0
    assert direct.usage.cost_usd == pytest.approx(through.usage.cost_usd, rel=1e-9)
