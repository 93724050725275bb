"""Offline evaluation: run a target over a dataset, score every output, trace every item.

`run_evals` / `arun_evals` call the target on each item's input (bounded concurrency), score the
output with every scorer (ground truth passed through), and return an `EvalResult`. Every item
is an `invoke_agent {name}` span carrying its score events, exported like live traffic. A failing
target or scorer on one item is recorded as an `ItemFailure`; the other items carry on. A
`SystemExit` from the target, a scorer or the callback is such a failure too; a
`KeyboardInterrupt` stops the whole run at once (items in flight are cancelled, their spans
ended) and is re-raised to the caller.

The run itself is `_run`, the checks of the arguments `_checks`, the result types `_results`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tracescore._exceptions import ConfigurationError
from tracescore.evals._checks import (
    _check_items,
    _check_scorers,
    _check_thresholds,
    _preflight,
    _resolve_target,
    _target_name,
)
from tracescore.evals._results import (
    STEP_CALLBACK as STEP_CALLBACK,
)
from tracescore.evals._results import (
    STEP_TARGET as STEP_TARGET,
)
from tracescore.evals._results import (
    EvalResult,
    EvalSummary,
    ItemFailure,
    ItemResult,
)
from tracescore.evals._run import OnItemComplete as OnItemComplete
from tracescore.evals._run import Progress as Progress
from tracescore.evals._run import _Interrupted, _Run, _summarize

if TYPE_CHECKING:
    from tracescore.scoring import Scorer

    # a scorer, its name, or a spec {"scorer": name, "options": {...}} (the gateway config's form)
    ScorerSpec = Scorer | str | Mapping[str, Any]


__all__ = ["EvalResult", "EvalSummary", "ItemFailure", "ItemResult", "arun_evals", "run_evals"]

DEFAULT_CONCURRENCY = 4


def run_evals(
    data: Iterable[Mapping[str, Any]],
    scorers: ScorerSpec | Sequence[ScorerSpec],
    target: Any,
    *,
    on_item_complete: OnItemComplete | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    thresholds: Mapping[str, float] | None = None,
    progress: Progress | None = None,
    name: str | None = None,
) -> EvalResult:
    """Evaluate `target` over `data` with `scorers`; blocking twin of `arun_evals`.

    Works with or without a running event loop: the run happens on tracescore's scoring loop
    (the one sync `Scorer.run` uses), so judge HTTP clients stay valid across runs.
    """
    from tracescore.scoring._base import run_sync

    return run_sync(arun_evals(data, scorers, target, on_item_complete=on_item_complete,
                               concurrency=concurrency, thresholds=thresholds,
                               progress=progress, name=name))


async def arun_evals(
    data: Iterable[Mapping[str, Any]],
    scorers: ScorerSpec | Sequence[ScorerSpec],
    target: Any,
    *,
    on_item_complete: OnItemComplete | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    thresholds: Mapping[str, float] | None = None,
    progress: Progress | None = None,
    name: str | None = None,
) -> EvalResult:
    """Evaluate `target` over `data` with `scorers`.

    - `data`: items `{"input": ..., "ground_truth": ...}`, optionally with `tool_calls` (tool
      names, or dicts with name/arguments/result/error/call_id) and `context` (texts) for
      scorers that take them, `trajectory` (the run's steps) and `expected_trajectory` (the
      steps it should take) for run scorers; other keys are kept as metadata. A multi-turn
      item gives `turns` (user messages, or `{"input", "output"}` for turns already answered)
      instead of `input`: the target is called once per unanswered turn with the conversation
      so far (chat messages), and conversation scorers get every turn.
    - `scorers`: scorer objects, or names such as `"keyword-coverage"` (default options).
    - `target`: a sync or async function (or generator) taking the input, or an agent object
      with `ainvoke`/`arun`/`invoke`/`run`. Sync targets run on worker threads.
    - `on_item_complete(item, target_result, scorer_results)`: sync or async, called per item.
    - `thresholds`: `{scorer_id: minimum mean}` giving `EvalResult.passed`.
    - `progress(completed, total)`: called after each item.
    Raises ConfigurationError for bad arguments and for a judge that cannot work (a model
    litellm does not know, an API key not set: see `LiteLLMJudge.preflight`), before anything
    runs, and KeyboardInterrupt
    when the target, a scorer or a callback raised one (the run stops at once).
    """
    items = _check_items(data)
    scorer_list = _check_scorers(scorers)
    call = _resolve_target(target)
    limits = _check_thresholds(thresholds, scorer_list)
    if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
        raise ConfigurationError(f"concurrency must be a positive integer, got {concurrency!r}")
    _preflight(scorer_list)
    run = _Run(
        name=name or _target_name(target),
        run_id=uuid.uuid4().hex,
        scorers=scorer_list,
        call=call,
        on_item_complete=on_item_complete,
        progress=progress,
        total=len(items),
        concurrency=concurrency,
    )
    started = time.perf_counter()
    try:
        results = await run.all(items)
    except _Interrupted as stop:
        raise stop.interrupt from None
    finally:
        run.close()
    return _summarize(run, results, limits, time.perf_counter() - started)
