"""One scorer, three places: a custom scorer that takes `tool_calls` and `context` gets the same
data in process (`configure(scorers=...)`), in the scoring gateway (`tracescore serve`, fed by the
same decorated agent over OTLP) and in `run_evals` (the dataset item giving the same calls).

Each plan is a generated family member: tool calls with arguments, some failing, some nested in
a sub-agent. The scorer (tests/_helpers.SeenScorer) reports what it got in its reason, read back
from the evaluation event a real OTLP receiver decodes (in process and gateway) and from the
run_evals result.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _gateway_helpers import seen_gateway
from _helpers import SCORING_BUDGET_S, SeenScorer, shut_down_pipelines

import tracescore
from tracescore import _semconv as sc
from tracescore.gateway import Gateway
from tracescore.testing import OTLPReceiver

Step = tuple[str, dict[str, Any], bool, bool]  # tool name, arguments, fails, nested


def plan(seed: int) -> list[Step]:
    """2-5 tool calls over four tools; about one in four fails, one in three runs in a sub-agent."""
    rng = random.Random(seed)
    return [(rng.choice(["search", "refund", "lookup", "email"]),
             {"q": rng.choice(["refund", "order 7", "π ≥ 3"]), "n": rng.randrange(100)},
             rng.random() < 0.25, rng.random() < 0.33)
            for _ in range(rng.randrange(2, 6))]


def _result(name: str, arguments: dict[str, Any]) -> str:
    return f"{name}: {arguments['q']} #{arguments['n']}"


def _tool(name: str) -> Callable[..., str]:
    @tracescore.tool(name=name)
    def call(q: str, n: int, fails: bool) -> str:
        if fails:
            raise PermissionError(f"{name} denied")
        return _result(name, {"q": q, "n": n})

    return call


TOOLS = {name: _tool(name) for name in ("search", "refund", "lookup", "email")}


def _call(step: Step) -> None:
    name, arguments, fails, _ = step
    try:
        TOOLS[name](arguments["q"], arguments["n"], fails)
    except PermissionError:
        pass


@tracescore.agent(name="helper")
def helper(step: Step) -> str:
    _call(step)
    return "done"


@tracescore.agent(name="support")
def support(question: str, steps: list[Step]) -> str:
    for step in steps:
        helper(step) if step[3] else _call(step)
    return "Handled."


def expected(steps: list[Step]) -> dict[str, Any]:
    """What the scorer should see of `support`'s call: every tool call in order, nested included;
    the context is the successful calls' results."""
    tools = [[name, {"q": args["q"], "n": args["n"], "fails": fails},
              None if fails else _result(name, args), f"{name} denied" if fails else None]
             for name, args, fails, _ in steps]
    return {"tools": tools, "context": [t[2] for t in tools if t[2] is not None],
            "ids": [None] * len(tools)}


def seen_on_support(receiver: OTLPReceiver) -> list[dict[str, Any]]:
    (span,) = receiver.wait_for_spans(lambda s: s.name == "invoke_agent support",
                                      timeout=SCORING_BUDGET_S)
    return [json.loads(e.attributes[sc.GEN_AI_EVALUATION_EXPLANATION])
            for e in span.events_named(sc.GEN_AI_EVALUATION_RESULT)]


@pytest.fixture(autouse=True)
def _clean_pipelines(span_exporter: Any) -> Iterator[None]:
    yield
    shut_down_pipelines()


@pytest.fixture
def gateway(tmp_path: Path, otlp_receiver: OTLPReceiver) -> Iterator[Gateway]:
    with seen_gateway(tmp_path, otlp_receiver.grpc_endpoint) as gateway:
        yield gateway


@pytest.mark.parametrize("seed", range(4))
def test_the_same_scorer_gets_the_same_tool_calls_and_context_in_all_three_places(
        seed: int, otlp_receiver: OTLPReceiver, gateway: Gateway) -> None:
    steps = plan(seed)
    want = expected(steps)

    # 1. in process: the scorer runs beside the agent; spans go to the receiver directly
    direct = OTLPReceiver().start()
    try:
        handle = tracescore.configure(exporter="otlp-http", endpoint=direct.http_endpoint,
                                      scorers=[SeenScorer()],
                                      online={"max_wait_s": SCORING_BUDGET_S})
        support("refund for order 7", steps)
        assert handle.flush(SCORING_BUDGET_S)
        assert seen_on_support(direct) == [want]
    finally:
        shut_down_pipelines()
        direct.stop()

    # 2. the gateway: the same agent, unscored in process, its spans sent to `tracescore serve`
    handle = tracescore.configure(exporter="otlp-http",
                                  endpoint=f"http://127.0.0.1:{gateway.http_port}")
    support("refund for order 7", steps)
    assert handle.flush(SCORING_BUDGET_S)
    assert seen_on_support(otlp_receiver) == [want]

    # 3. run_evals: a dataset item gives the same calls and context
    item = {"input": "refund for order 7",
            "tool_calls": [{"name": n, "arguments": a, "result": r, "error": e}
                           for n, a, r, e in want["tools"]],
            "context": want["context"]}
    result = tracescore.run_evals([item], [SeenScorer()], target=lambda q: "Handled.")
    (row,) = result.items
    assert json.loads(row.scores["seen"].reason or "") == want
