"""Shared by the reach tests: a stub judge that shows what was judged, and a scoring gateway
(`receiver, stub, gateway = gateway_fixtures()` gives a test module its three fixtures).

The judge answers every relevancy step: the answer's one statement is the output block and every
verdict "yes" (score 1), so `judged_pairs` reads back, from the verdicts requests, exactly which
question and answer each agent call was judged on.
"""

from __future__ import annotations

import contextlib
import json
import re
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tracescore import _semconv as sc
from tracescore.testing import GatewayProcess, OTLPReceiver, ReceivedSpan, Reply, StubLLMServer


def judge(request: Any) -> Reply:
    """The stub judge: the answer's one statement is the output block, every verdict "yes"."""
    step = request.get("response_format", {}).get("json_schema", {}).get("name", "")
    prompt = request["messages"][-1]["content"]
    if step.endswith("statements"):
        return Reply(content={"statements": [block(prompt, "output")]})
    if step.endswith("verdicts"):
        return Reply(content={"results": [{"result": "yes", "reason": "on topic"}]})
    return Reply(content={"reason": "The score is 1 because it answers the question."})


def block(prompt: str, tag: str) -> str:
    """The text between `<tag>` and `</tag>` in a judge prompt."""
    found = re.search(rf"<{tag}>\n(.*?)\n</{tag}>", prompt, re.DOTALL)
    assert found is not None, prompt
    return found.group(1)


def judged_pairs(stub: StubLLMServer) -> list[tuple[str, str]]:
    """(question block, statement) of every verdicts request the judge received."""
    pairs = []
    for request in stub.requests:
        step = request.get("response_format", {}).get("json_schema", {}).get("name", "")
        if step.endswith("verdicts"):
            prompt = request.messages[-1]["content"]
            pairs.append((block(prompt, "question"), *json.loads(block(prompt, "statements"))))
    return pairs


def assert_spans_scored(sent: list[ReceivedSpan], received: list[ReceivedSpan],
                        is_agent: Callable[[ReceivedSpan], bool]) -> int:
    """Every span arrived once and unchanged but for what the gateway adds; the agent spans with
    one evaluation (score 1, the judge above), no other span scored; how many were scored."""
    keys = [(s.trace_id, s.span_id) for s in received]
    assert len(set(keys)) == len(keys) == len(sent)
    by_key = {(s.trace_id, s.span_id): s for s in received}
    agents = 0
    for span in sent:
        got = by_key[(span.trace_id, span.span_id)]
        assert _content(got) == _content(span)  # nothing changed but the added evaluation
        events = got.events_named(sc.GEN_AI_EVALUATION_RESULT)
        assert len(events) == is_agent(span), span.name
        for event in events:
            assert event.attributes[sc.GEN_AI_EVALUATION_SCORE_VALUE] == 1.0, event.attributes
            agents += 1
    return agents


def _content(span: ReceivedSpan) -> ReceivedSpan:
    """The span without what the gateway adds (its evaluation and step events) and what the two
    exports differ in (the tee writes a minimal resource)."""
    own = [e for e in span.events
           if e.name != sc.GEN_AI_EVALUATION_RESULT and not e.name.startswith("tracescore.")]
    return replace(span, resource={}, protocol="", events=own)


def post_otlp_json(http_port: int, lines: list[str], timeout_s: float = 30) -> None:
    """Each OTLP/JSON export request of `lines` to a gateway's OTLP/HTTP receiver, taken (200)."""
    for line in lines:
        request = urllib.request.Request(
            f"http://127.0.0.1:{http_port}/v1/traces", data=line.encode(),
            headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(request, timeout=timeout_s) as reply:
            assert reply.status == 200


def unreadable_counts(gateway: GatewayProcess) -> dict[tuple[str, str], int]:
    """The gateway's count of agent-like spans it could not read, per (framework, reason)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{gateway.health_port}/metrics",
                                timeout=10) as reply:
        text = reply.read().decode()
    pattern = re.compile(r'^tracescore_gateway_unreadable_agent_spans_total'
                         r'\{framework="([^"]*)",reason="([^"]*)"\} (\d+)$', re.MULTILINE)
    return {(m.group(1), m.group(2)): int(m.group(3)) for m in pattern.finditer(text)}


def relevancy_options(stub: StubLLMServer) -> str:
    """The relevancy scorer's options judging at `stub`, as a YAML flow mapping."""
    return (f"{{model: openai/judge-stub, api_base: '{stub.base_url}', api_key: sk-test, "
            "timeout: 30}")


@contextlib.contextmanager
def relevancy_gateway(folder: Path, receiver: OTLPReceiver, stub: StubLLMServer,
                      extra_config: str = "") -> Iterator[GatewayProcess]:
    """A `tracescore serve` process scoring relevancy at `stub`, forwarding to `receiver`."""
    config = folder / "gateway.yaml"
    config.write_text("scoring:\n  isolation: thread\n  scorers:\n"
                      f"    - {{scorer: relevancy, options: {relevancy_options(stub)}}}\n"
                      + extra_config, encoding="utf-8")
    process = GatewayProcess(["--config", str(config), "--endpoint", receiver.grpc_endpoint,
                              "--journal", str(folder / "journal.db")]).start()
    try:
        yield process
    finally:
        process.stop()


def gateway_fixtures(extra_config: str = "") -> tuple[Any, Any, Any]:
    """The module-scoped fixtures `receiver` (where the gateway forwards), `stub` (the judge
    above) and `gateway` (`relevancy_gateway` with `extra_config`), for a test module to bind:
    `receiver, stub, gateway = gateway_fixtures()`."""

    @pytest.fixture(scope="module", name="receiver")
    def receiver() -> Iterator[OTLPReceiver]:
        with OTLPReceiver() as running:
            yield running

    @pytest.fixture(scope="module", name="stub")
    def stub() -> Iterator[StubLLMServer]:
        with StubLLMServer() as running:
            running.responder = judge
            yield running

    @pytest.fixture(scope="module", name="gateway")
    def gateway(tmp_path_factory: pytest.TempPathFactory, receiver: OTLPReceiver,
                stub: StubLLMServer) -> Iterator[GatewayProcess]:
        with relevancy_gateway(tmp_path_factory.mktemp("gateway"), receiver, stub,
                               extra_config) as running:
            yield running

    return receiver, stub, gateway
