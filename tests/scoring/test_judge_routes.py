"""A judge call through litellm's HTTP handler (OpenAI and vLLM endpoints, the default) sends
what `litellm.acompletion` sends, reads the reply and prices it the same, and fails the same
way; `through_acompletion=True`, another provider or a litellm argument of its own go through
`litellm.acompletion`, whose callbacks then see the judge's calls."""

from __future__ import annotations

import asyncio
import pickle
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracescore import JudgeAuthenticationError, JudgeStepError
from tracescore.scoring._litellm_judge import LiteLLMJudge
from tracescore.scoring._prompts import statements_request
from tracescore.testing import StubLLMServer

REQUEST = statements_request("Paris is the capital of France.")
REPLY = {"statements": ["Paris is the capital of France."]}
SENT_HEADERS = ("authorization", "content-type", "x-team")


@pytest.fixture(scope="module")
def stub() -> Iterator[StubLLMServer]:
    with StubLLMServer(default_reply=REPLY) as server:
        yield server


def _judge(stub: StubLLMServer, model: str, through_acompletion: bool,
           **options: Any) -> LiteLLMJudge:
    options = {"api_key": "sk-test", **options}
    return LiteLLMJudge(model, api_base=stub.base_url, timeout=10, max_retries=0,
                        through_acompletion=through_acompletion, **options)


def _sent(stub: StubLLMServer, judge: LiteLLMJudge) -> tuple[dict[str, Any], dict[str, str], Any]:
    """What the judge's one call sent (body, headers) and what it made of the reply."""
    before = len(stub.requests)
    reply = asyncio.run(judge.judge(REQUEST))
    (request,) = stub.requests[before:]
    headers = {k: v for k, v in request.headers.items() if k in SENT_HEADERS}
    return request.json, headers, (reply.data, reply.raw, reply.usage.input_tokens,
                                   reply.usage.output_tokens, reply.usage.cost_usd)


_OPTIONS = st.fixed_dictionaries({}, optional={
    "temperature": st.sampled_from([0.0, 0.2, 1.0]),
    "max_tokens": st.integers(1, 4096),
    "seed": st.integers(0, 2**31),
    "top_p": st.sampled_from([0.1, 0.9]),
    "extra_body": st.dictionaries(st.sampled_from(["guided_json", "priority", "tag"]),
                                  st.text(max_size=8) | st.integers(), max_size=2),
    "extra_headers": st.builds(lambda v: {"X-Team": v},
                               st.text("abcdefgh-", min_size=1, max_size=8)),
    "json_mode": st.sampled_from(["json_schema", "json_object", "prompt"]),
})


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(model=st.sampled_from(["openai/gpt-4o-mini", "openai/judge-stub",
                              "hosted_vllm/my-judge"]), options=_OPTIONS, keyless=st.booleans())
def test_both_routes_send_the_same_request_and_read_the_same_reply(
        stub: StubLLMServer, model: str, options: dict[str, Any], keyless: bool) -> None:
    if keyless and model.startswith("hosted_vllm/"):  # a local server without a key
        options = {**options, "api_key": None}
    direct = _sent(stub, _judge(stub, model, False, check_model=False, **options))
    through = _sent(stub, _judge(stub, model, True, check_model=False, **options))
    assert direct == through
    if model == "openai/gpt-4o-mini":  # priced by litellm: the same cost either way
        assert direct[2][4] is not None and direct[2][4] > 0


@pytest.mark.parametrize("status", [400, 401, 403, 404, 408, 409, 422, 429, 500, 502, 503])
def test_both_routes_fail_alike(stub: StubLLMServer, status: int) -> None:
    failures = []
    for through in (False, True):
        stub.enqueue_error(status, f"refused with {status}")
        with pytest.raises(JudgeStepError) as caught:
            asyncio.run(_judge(stub, "openai/judge-stub", through,
                               json_mode="prompt").judge(REQUEST))  # no second try
        failures.append(caught.value)
    direct, through_acompletion = failures
    assert type(direct) is type(through_acompletion)
    assert direct.retryable == through_acompletion.retryable
    assert isinstance(direct, JudgeAuthenticationError) == (status in (401, 403))
    for failure in failures:  # the provider's words, not its JSON; the same kind of error
        text = str(failure)
        assert f"refused with {status}" in text and '"error"' not in text
        assert text.split(" - ")[0].split(":")[2] == str(through_acompletion).split(
            " - ")[0].split(":")[2]  # e.g. " RateLimitError (HTTP 429)"


def test_both_routes_name_a_judge_that_cannot_be_reached() -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    messages = []
    for through in (False, True):
        judge = LiteLLMJudge("openai/judge-stub", api_base=f"http://127.0.0.1:{port}/v1",
                             api_key="sk-test", timeout=5, max_retries=0,
                             through_acompletion=through)
        with pytest.raises(JudgeStepError) as caught:
            asyncio.run(judge.judge(REQUEST))
        messages.append((str(caught.value), caught.value.retryable))
    assert messages[0] == messages[1]
    assert (f"could not connect to the judge at 127.0.0.1:{port} (connection refused") in messages[0][0]


@pytest.mark.parametrize("through", [False, True])
def test_retry_after_is_read_on_either_route(stub: StubLLMServer, through: bool) -> None:
    stub.enqueue_error(429, "slow down", headers={"Retry-After": "0.25"})
    judge = LiteLLMJudge("openai/judge-stub", api_base=stub.base_url, api_key="sk-test",
                         max_retries=1, through_acompletion=through)
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    judge._sleep = sleep
    assert asyncio.run(judge.judge(REQUEST)).data == REPLY
    assert waits == [0.25]


def test_a_litellm_argument_of_its_own_goes_through_acompletion(stub: StubLLMServer) -> None:
    before = len(stub.requests)  # litellm answers a mock_response itself: nothing is sent
    judge = LiteLLMJudge("openai/judge-stub", api_base=stub.base_url, api_key="sk-test",
                         mock_response='{"statements": ["Mocked."]}')
    assert asyncio.run(judge.judge(REQUEST)).data == {"statements": ["Mocked."]}
    assert len(stub.requests) == before


def test_a_judge_pickled_after_its_first_call_is_sent_the_same_way(stub: StubLLMServer) -> None:
    judge = _judge(stub, "openai/judge-stub", False)
    first = _sent(stub, judge)  # prepared: litellm's objects are not pickled with it
    loaded = pickle.loads(pickle.dumps(judge))  # as the gateway sends it to its scoring process
    assert _sent(stub, loaded) == first


@pytest.mark.parametrize("through", [False, True])
def test_litellm_callbacks_see_judge_calls_only_through_acompletion(
        stub: StubLLMServer, through: bool) -> None:
    import litellm
    from litellm.integrations.custom_logger import CustomLogger

    seen: list[str] = []

    class Counting(CustomLogger):
        async def async_log_success_event(self, kwargs: Any, response_obj: Any,
                                          start_time: Any, end_time: Any) -> None:
            seen.append(str(kwargs.get("model")))

    counting = Counting()
    litellm.callbacks.append(counting)
    try:
        judge = _judge(stub, "openai/judge-stub", through)

        async def two_calls() -> None:
            for _ in range(2):
                await judge.judge(REQUEST)
            deadline = time.monotonic() + 5  # litellm's logging worker runs the callbacks
            while len(seen) < 2 and through and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.2)  # and none comes late on the other route

        asyncio.run(two_calls())
    finally:
        litellm.callbacks.remove(counting)
    assert seen == (["judge-stub", "judge-stub"] if through else [])


def test_a_litellm_whose_handler_takes_other_arguments_is_sent_through_acompletion(
        stub: StubLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    import litellm.main

    class Handler:  # a handler of another litellm release, without `provider_config`
        async def completion(self, model: str, messages: list[Any], **rest: Any) -> Any:
            raise AssertionError("a handler with other arguments was called")

    monkeypatch.setattr(litellm.main, "base_llm_http_handler", Handler())
    body, _, reply = _sent(stub, _judge(stub, "openai/judge-stub", False))
    assert reply[0] == REPLY and body["model"] == "judge-stub"


def test_the_route_never_shows_the_key(stub: StubLLMServer) -> None:
    judge = _judge(stub, "openai/judge-stub", False, api_key="sk-secret-123",
                   extra_headers={"X-Api-Key": "hdr-secret-456"})
    _sent(stub, judge)
    shown = repr(judge._route)  # what a debug log line of the route would hold
    assert "judge-stub" in shown and "sk-secret" not in shown and "hdr-secret" not in shown
