"""The judge client's CPU per call, against litellm's own floor, side by side in one process.

Against the stub judge (`bench_gateway.judge_reply`, no delay) in a child process, so that
this process's CPU (every thread: litellm hands work to a thread pool) is the client's alone:

  * `litellm.acompletion` alone: the request the judge sends for the relevancy scorer's first
    step, with the judge's own arguments (timeout, no litellm retries, JSON schema);
  * `LiteLLMJudge.judge`: the same step through the judge (retries, reply validation, usage
    and cost, judge trace), which sends it through litellm's HTTP handler (`_litellm_direct`);
  * the same with `through_acompletion=True` (every call through `litellm.acompletion`);
  * a relevancy score (3 judge calls), per judge call.

Each round runs every case once, in rotating order; figures are medians of the rounds.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import resource
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

CONCURRENCY = 4  # calls in flight, as a scoring process runs several scores at once


def _serve(queue: Any) -> None:
    from bench_gateway import judge_reply

    from tracescore.testing import StubLLMServer

    stub = StubLLMServer(responder=judge_reply).start()
    queue.put(stub.base_url)
    time.sleep(24 * 3600)  # until terminated


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)  # every thread of this process
    return usage.ru_utime + usage.ru_stime


async def _measure(call: Callable[[], Awaitable[Any]], calls: int) -> tuple[float, float]:
    """(CPU ms, wall ms) per call of `calls` calls, CONCURRENCY at a time."""
    cpu, wall = _cpu_s(), time.perf_counter()
    for _ in range(calls // CONCURRENCY):
        await asyncio.gather(*(call() for _ in range(CONCURRENCY)))
    return (1000 * (_cpu_s() - cpu) / calls, 1000 * (time.perf_counter() - wall) / calls)


async def _cases(base_url: str, calls: int, rounds: int) -> dict[str, list[tuple[float, float]]]:
    import litellm

    from tracescore.scoring._litellm_judge import LiteLLMJudge
    from tracescore.scoring._prompts import statements_request
    from tracescore.scoring.relevancy import AnswerRelevancyScorer

    options: dict[str, Any] = {"api_base": base_url, "api_key": "sk-test", "timeout": 60}
    judge = LiteLLMJudge("openai/judge", **options)
    wrapped = LiteLLMJudge("openai/judge", through_acompletion=True, **options)
    scorer = AnswerRelevancyScorer(model=judge)
    request = statements_request("Paris is the capital of France.")
    messages = [{"role": "system", "content": request.system},
                {"role": "user", "content": request.prompt}]
    schema = {"type": "json_schema", "json_schema": {
        "name": request.schema_name, "schema": request.schema, "strict": True}}

    async def bare() -> None:
        await litellm.acompletion(model="openai/judge", messages=messages, num_retries=0,
                                  max_retries=0, response_format=schema, **options)

    async def judged() -> None:
        await judge.judge(request)

    async def judged_through_acompletion() -> None:
        await wrapped.judge(request)

    async def score() -> None:
        result = await scorer.arun(input="What is the capital of France?",
                                   output="Paris is the capital of France.")
        if result.score != 1.0:
            raise RuntimeError(f"the stub judge's relevancy score is {result.score}, not 1.0")

    cases: dict[str, tuple[Callable[[], Awaitable[Any]], int]] = {
        "litellm.acompletion alone": (bare, calls),
        "LiteLLMJudge.judge": (judged, calls),
        "LiteLLMJudge.judge, through_acompletion": (judged_through_acompletion, calls),
        "relevancy score / 3": (score, max(CONCURRENCY, calls // 3)),
    }
    for call, _ in cases.values():  # warm-up: imports, connections, caches
        for _ in range(8):
            await call()
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
    names = list(cases)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            call, n = cases[name]
            cpu_ms, wall_ms = await _measure(call, n)
            per = 3 if name.startswith("relevancy") else 1
            samples[name].append((cpu_ms / per, wall_ms / per))
    return samples


def judge_client(calls: int = 240, rounds: int = 5) -> dict[str, Any]:
    """CPU and wall ms per judge call of each case, and each case over litellm alone."""
    context = mp.get_context("spawn")
    queue = context.Queue()
    stub = context.Process(target=_serve, args=(queue,), daemon=True)
    stub.start()
    try:
        base_url = queue.get(timeout=120)
        samples = asyncio.run(_cases(base_url, calls, rounds))
    finally:
        stub.terminate()
        stub.join(10)
    floor = statistics.median(c for c, _ in samples["litellm.acompletion alone"])
    return {name: {"cpu_ms_per_call": statistics.median(c for c, _ in runs),
                   "wall_ms_per_call": statistics.median(w for _, w in runs),
                   "over_litellm_alone": statistics.median(c for c, _ in runs) / floor,
                   "rounds": runs}
            for name, runs in samples.items()}
