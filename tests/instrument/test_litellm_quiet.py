"""`instrument_litellm()` prints nothing: a model litellm has no price for (a local server's, as
with Ollama or vLLM) made litellm print its "Provider List" banner on stdout when the span's cost
was looked up. Real litellm calls to the local stub with generated model names, every call style,
stdout captured; litellm's own behaviour for the user's calls is left as it was."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import litellm
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracescore
from tracescore.testing import StubLLMServer

NAMES = st.from_regex(r"[a-z][a-z0-9]{1,8}(-[a-z0-9]{1,6}){0,2}", fullmatch=True).filter(
    lambda name: name not in litellm.model_cost)
STYLES = ("openai/", "hosted_vllm/", "custom_llm_provider")


@pytest.fixture
def instrumented() -> Iterator[None]:
    tracescore.instrument_litellm()
    yield
    tracescore.uninstrument_litellm()


def _kwargs(stub: StubLLMServer, style: str, name: str) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"api_base": stub.base_url, "api_key": "sk-test", "max_retries": 0,
                              "messages": [{"role": "user", "content": "Capital of France?"}]}
    if style == "custom_llm_provider":
        return {**kwargs, "model": name, "custom_llm_provider": "openai"}
    return {**kwargs, "model": f"{style}{name}"}


def _call(stub: StubLLMServer, mode: str, kwargs: dict[str, Any]) -> str:
    stub.enqueue("Paris.", usage={"prompt_tokens": 5, "completion_tokens": 2})
    if mode == "stream":
        return "".join(chunk.choices[0].delta.content or ""
                       for chunk in litellm.completion(stream=True, **kwargs))
    if mode == "async":
        reply = asyncio.run(litellm.acompletion(**kwargs))
    else:
        reply = litellm.completion(**kwargs)
    return str(reply.choices[0].message.content)


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=NAMES, style=st.sampled_from(STYLES),
       mode=st.sampled_from(("completion", "stream", "async")))
def test_a_model_without_a_price_prints_nothing(
        instrumented: None, stub_llm: StubLLMServer, capfd: pytest.CaptureFixture[str],
        name: str, style: str, mode: str) -> None:
    capfd.readouterr()
    assert _call(stub_llm, mode, _kwargs(stub_llm, style, name)) == "Paris."
    out = capfd.readouterr().out
    assert out == "", out


def test_the_users_own_litellm_keeps_its_behaviour(
        instrumented: None, stub_llm: StubLLMServer, capfd: pytest.CaptureFixture[str]) -> None:
    """Only tracescore's own lookups are quiet: litellm's settings are untouched and its own
    banner for a model it cannot place still shows when the user asks."""
    _call(stub_llm, "completion", _kwargs(stub_llm, "openai/", "my-local-llama"))
    assert litellm.suppress_debug_info is False
    capfd.readouterr()
    with pytest.raises(litellm.exceptions.BadRequestError):
        litellm.get_llm_provider("my-local-llama")
    assert "Provider List" in capfd.readouterr().out
