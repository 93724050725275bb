"""What tracing the judge costs, side by side in one run: answer relevancy scored online (real
litellm over HTTP to the stub judge, the judge in the worker thread), with the judge's calls
traced (`trace_judge=True`: three `chat` spans per score, built and exported by the worker) and
not (`trace_judge=False`).

Per score: the process's CPU (agent, worker, stub judge and export together: the stub's share
is the same in both arms) and the agent thread's CPU per call (the tracing happens after the
run, in the worker: the agent's share should not move). The arms alternate, `--rounds` times.

    python benchmarks/bench_judge_trace.py [--calls N] [--rounds R] [--json PATH]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import environment, print_table, write_json
from _pipeline import Discard

import tracescore
from tracescore.online import OnlineScorer
from tracescore.testing import StubLLMServer
from tracescore.testing._stub_llm import Reply

QUESTION = "What is the capital of France?"
ANSWER = "Paris is the capital of France."


def respond(request: dict) -> Reply:
    step = request.get("response_format", {}).get("json_schema", {}).get("name", "")
    if step.endswith("statements"):
        return Reply(content={"statements": [ANSWER]})
    if step.endswith("verdicts"):
        return Reply(content={"results": [{"result": "yes", "reason": "on topic"}]})
    return Reply(content={"reason": "The score is 1 because it answers the question."})


@tracescore.agent(name="bench")
def agent(question: str) -> str:
    return ANSWER


def one_arm(stub: StubLLMServer, traced: bool, calls: int) -> tuple[float, float]:
    """(process CPU ms per score, agent-thread CPU us per call)."""
    scorer = tracescore.create_answer_relevancy_scorer(
        model="openai/bench-judge", api_base=stub.base_url, api_key="sk-test", timeout=30)
    handle = tracescore.configure(
        exporter=Discard(), scorers=[OnlineScorer(scorer, trace_judge=traced)],
        online={"isolation": "thread", "max_wait_s": 60, "queue_size": calls + 10})
    try:
        process_start, thread_start = time.process_time(), time.thread_time()
        for _ in range(calls):
            agent(QUESTION)
        thread_cpu = time.thread_time() - thread_start
        assert handle.flush(120)
        process_cpu = time.process_time() - process_start
    finally:
        handle.shutdown(10)
    return process_cpu / calls * 1e3, thread_cpu / calls * 1e6


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", dest="json_path")
    args = parser.parse_args(argv)
    results: dict[str, list[tuple[float, float]]] = {"off": [], "on": []}
    with StubLLMServer() as stub:
        stub.responder = respond
        one_arm(stub, False, 5)  # litellm imported and warm before anything is measured
        for _ in range(args.rounds):
            for arm in ("off", "on"):
                results[arm].append(one_arm(stub, arm == "on", args.calls))
    medians = {arm: (statistics.median(r[0] for r in rows), statistics.median(r[1] for r in rows))
               for arm, rows in results.items()}
    rows = [(f"trace_judge {arm}", score_ms, agent_us) for arm, (score_ms, agent_us)
            in medians.items()]
    rows.append(("on / off", medians["on"][0] / medians["off"][0],
                 medians["on"][1] / medians["off"][1]))
    print_table(rows, ["case", "process CPU ms per score", "agent CPU us per call"],
                title=f"The judge traced: {args.calls} scores x {args.rounds} rounds (medians)")
    write_json(args.json_path, {"environment": environment(), "results": results,
                                "medians": medians})
    return 0


if __name__ == "__main__":
    sys.exit(main())
