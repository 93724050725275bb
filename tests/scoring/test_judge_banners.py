"""litellm's stdout help banners are silenced for the judge's own calls only.

litellm prints "Give Feedback / Get Help" when it maps a provider error and "Provider List" for a
model it cannot route. The judge's calls must not print them (they pollute CLI and test output);
the user's own litellm calls keep litellm's behaviour, and its global settings stay as they were.
"""

from __future__ import annotations

import asyncio

import pytest

import tracescore
from tracescore import ScorerError
from tracescore.testing import StubLLMServer

FEEDBACK = "Give Feedback / Get Help"
PROVIDERS = "Provider List"
MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.fixture
def litellm_default_settings(monkeypatch: pytest.MonkeyPatch):
    import litellm

    monkeypatch.setattr(litellm, "suppress_debug_info", False)  # litellm's default: banners on
    return litellm


def _judge(api_base: str | None, model: str = "openai/judge") -> tracescore.AnswerRelevancyScorer:
    return tracescore.create_answer_relevancy_scorer(model=model, api_base=api_base,
                                                     api_key="sk-test", max_retries=0)


def test_failing_judge_calls_print_no_banner(stub_llm: StubLLMServer, litellm_default_settings,
                                             capfd: pytest.CaptureFixture[str]) -> None:
    stub_llm.enqueue_error(500, "the judge broke")
    with pytest.raises(ScorerError, match="InternalServerError"):
        _judge(stub_llm.base_url).run(input="Capital of France?", output="Paris.")
    with pytest.raises(tracescore.ConfigurationError):  # checked before the first call
        _judge(None, model="no-such-provider-xyz").run(input="Capital of France?", output="Paris.")
    out, err = capfd.readouterr()
    assert FEEDBACK not in out + err and PROVIDERS not in out + err
    assert litellm_default_settings.suppress_debug_info is False  # the user's setting is untouched


def test_the_users_own_calls_still_print_while_a_judge_fails_alongside(
        stub_llm: StubLLMServer, litellm_default_settings,
        capfd: pytest.CaptureFixture[str]) -> None:
    litellm = litellm_default_settings
    stub_llm.enqueue_error(500, "the judge broke")

    async def users_call() -> None:
        with pytest.raises(litellm.BadRequestError):
            await litellm.acompletion(model="no-such-provider-xyz", messages=MESSAGES)

    async def main() -> None:
        judged = _judge(stub_llm.base_url).arun(input="Capital of France?", output="Paris.")
        results = await asyncio.gather(judged, users_call(), return_exceptions=True)
        assert isinstance(results[0], ScorerError) and results[1] is None

    asyncio.run(main())
    out, _ = capfd.readouterr()
    assert PROVIDERS in out  # the user's call: litellm prints as it always does
    assert FEEDBACK not in out  # the judge's 500: silenced


def test_successful_judge_of_an_unpriced_model_prints_no_banner(
        stub_llm: StubLLMServer, litellm_default_settings,
        capfd: pytest.CaptureFixture[str]) -> None:
    # The stub answers as model "stub", which litellm's price map cannot route: the cost lookup
    # after every judge call would print "Provider List" unless it is silenced too.
    stub_llm.enqueue({"statements": ["Paris is the capital of France."]})
    stub_llm.enqueue({"results": [{"result": "yes", "reason": "answers it"}]})
    stub_llm.enqueue({"reason": "The score is 1 because it answers the question."})
    result = _judge(stub_llm.base_url).run(input="Capital of France?", output="Paris.")
    out, err = capfd.readouterr()
    assert result.score == 1.0 and result.usage.cost_usd is None
    assert PROVIDERS not in out + err
