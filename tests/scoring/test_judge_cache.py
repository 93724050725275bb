"""The shared judge cache in a real redis-server (`make redis`): identical judge requests are
answered once by the judge (the stub), across processes' worth of scorers, never across scorer
versions or judged texts; a Redis that is down costs the cache, never the score."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import Any

import pytest
from _redis import RedisServer, redis

from tracescore import AnswerRelevancyScorer
from tracescore.scoring._judge_cache import CachedJudge, cache_judge
from tracescore.scoring._provenance import scorer_version
from tracescore.testing import StubLLMServer
from tracescore.testing._stub_llm import Reply

QUESTION = "What is the capital of France?"


def _judge(request: dict[str, Any]) -> Reply:
    step = request.get("response_format", {}).get("json_schema", {}).get("name", "")
    if step.endswith("statements"):
        return Reply(content={"statements": ["Paris is the capital of France."]})
    if step.endswith("verdicts"):
        return Reply(content={"results": [{"result": "yes", "reason": "answers it"}]})
    return Reply(content={"reason": "The score is 1 because it answers the question."})


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    srv = RedisServer()
    srv.start()
    yield srv
    srv.stop()


def _cached(stub: StubLLMServer, url: str, **options: Any) -> AnswerRelevancyScorer:
    return cache_judge(AnswerRelevancyScorer(model="openai/gpt-4o-mini", api_base=stub.base_url,
                                             api_key="sk-test", **options), url, ttl_s=600)


def test_identical_requests_reach_the_judge_once_across_replicas(
        server: RedisServer, stub_llm: StubLLMServer) -> None:
    stub_llm.responder = _judge
    replicas = [_cached(stub_llm, server.url) for _ in range(2)]
    first = replicas[0].run(input=QUESTION, output="Paris.")
    assert len(stub_llm.requests) == 3 and first.usage.cost_usd and first.usage.cost_usd > 0
    again = replicas[1].run(input=QUESTION, output="Paris.")  # another replica, same request
    assert len(stub_llm.requests) == 3
    assert again.score == first.score == 1.0 and again.reason == first.reason
    assert again.usage.calls == 0 and again.usage.cost_usd == 0.0
    judges = [r.judge for r in replicas]
    assert [(j.hits, j.misses) for j in judges] == [(0, 3), (3, 0)]  # type: ignore[attr-defined]
    stats = redis.Redis.from_url(server.url).hgetall(
        "{tracescore:judge-cache:" + judges[0].namespace + "}:stats")  # type: ignore[attr-defined]
    assert int(stats[b"hits"]) == 3 and int(stats[b"misses"]) == 3


@pytest.mark.parametrize("change", ["judged text", "scorer version", "judge option"])
def test_a_different_text_version_or_option_is_judged_again(
        server: RedisServer, stub_llm: StubLLMServer, change: str) -> None:
    stub_llm.responder = _judge
    output = f"Paris, {change}."  # this test's own text: nothing cached before
    _cached(stub_llm, server.url).run(input=QUESTION, output=output)
    before = len(stub_llm.requests)
    other = {"scorer version": {"uncertainty_weight": 0.25},
             "judge option": {"temperature": 0.5}, "judged text": {}}[change]
    scorer = _cached(stub_llm, server.url, **other)
    if change == "judged text":  # the step that carries it goes to the judge again; steps
        # whose request is the same as before (the same statements) are answered from the cache
        scorer.run(input=QUESTION, output=output + " Really.")
        asked = [str(r.json) for r in stub_llm.requests[before:]]
        assert any("Really." in text for text in asked)
        assert scorer.judge.misses >= 1  # type: ignore[attr-defined]
    else:  # another scorer version or judge option: nothing shared
        scorer.run(input=QUESTION, output=output)
        assert len(stub_llm.requests) == before + 3
        assert scorer.judge.hits == 0  # type: ignore[attr-defined]


def test_redis_down_costs_the_cache_never_the_score(stub_llm: StubLLMServer) -> None:
    stub_llm.responder = _judge
    scorer = _cached(stub_llm, "redis://127.0.0.1:1/0")
    result = scorer.run(input=QUESTION, output="Paris.")
    assert result.score == 1.0 and len(stub_llm.requests) == 3
    assert scorer.judge.errors >= 3  # type: ignore[attr-defined]


def test_the_cache_keeps_the_scorer_version_and_pickles(stub_llm: StubLLMServer) -> None:
    plain = AnswerRelevancyScorer(model="openai/gpt-4o-mini", api_base=stub_llm.base_url,
                                  api_key="sk-test")
    version = scorer_version(plain)
    cached = cache_judge(plain, "redis://127.0.0.1:1/0")
    assert isinstance(cached.judge, CachedJudge) and cached.judge.namespace.endswith(version)
    copy = pickle.loads(pickle.dumps(cached))
    assert scorer_version(copy) == version and copy.judge.model == "openai/gpt-4o-mini"
    assert "sk-test" not in repr(cached.judge._options)  # no secret in the keys


def test_the_gateway_yaml_gives_a_scorer_a_judge_cache(tmp_path: Any,
                                                       stub_llm: StubLLMServer) -> None:
    from tracescore._exceptions import ConfigurationError
    from tracescore.gateway import load_gateway_config

    path = tmp_path / "gateway.yaml"
    scorer = ("scoring:\n  scorers:\n    - scorer: relevancy\n      options: {model: "
              f"openai/gpt-4o-mini, api_base: '{stub_llm.base_url}', api_key: sk-test}}\n")
    path.write_text(scorer + "      judge_cache: {redis_url: 'redis://127.0.0.1:1/0', "
                    "ttl_s: 120}\n")
    (online,) = load_gateway_config(path, environ={}).scorers or ()
    judge = online.scorer.judge
    assert isinstance(judge, CachedJudge) and judge.ttl_s == 120
    assert judge.namespace.startswith(f"{online.scorer_id}@")
    path.write_text(scorer + "      judge_cache: {redis_url: 'redis://x', colour: red}\n")
    with pytest.raises(ConfigurationError, match=r"scoring.scorers\[0\].judge_cache"):
        load_gateway_config(path, environ={})
