"""Run scope in process: a scorer whose `scope` is "run" judges a whole run (the trace of one
top-level agent or workflow call), so it is scored at its run's root agent span only, never at
the sub-agents under it.

The root's end is the run's end in process: its children (tool calls, LLM calls, sub-agents)
ended before it, so what the collector kept below it is the whole run (`_run_steps` reads the
`Run` from it). A sub-agent ends while its root is still open: sampling it, the processor asks
the core for its call-scope scorers only (no run-scope rate limit or budget is taken), and
`keep_run_scorers` drops any run-scope scorer left on a call that is not its run's root when
its span ends (their budget reservations given back). The gateway waits for a run's quiet
period instead (`gateway/_run_scope`).
Sampling is the same rule as every scorer's (the trace id's randomness), so a run is sampled or
not as a whole. Nothing is held besides what the collector holds already: costs nothing when no
run-scope scorer is configured (`has_run_scope` is False and the hook is not called).
"""

from __future__ import annotations

from collections.abc import Sequence

from tracescore.online._options import OnlineScorer
from tracescore.online.intake import TraceSpans

RUN = "run"


def is_run_scoped(online: OnlineScorer) -> bool:
    """Whether `online` judges whole runs (its run's trace is collected for it)."""
    return getattr(online.scorer, "scope", "call") == RUN


def has_run_scope(scorers: Sequence[OnlineScorer]) -> bool:
    """Whether any scorer judges whole runs."""
    return any(is_run_scoped(o) for o in scorers)


def is_run_root(trace: TraceSpans | None) -> bool:
    """Whether the agent span that just ended (its trace as the collector's `end` returned it)
    is its run's root: no other agent span of its trace is still open."""
    return trace is None or not trace.agents


def keep_run_scorers(scorers: tuple[OnlineScorer, ...], root: bool
                     ) -> tuple[tuple[OnlineScorer, ...], tuple[OnlineScorer, ...]]:
    """(the scorers that score this agent call, the run-scope ones that wait for its root)."""
    if root:
        return scorers, ()
    kept = tuple(o for o in scorers if not is_run_scoped(o))
    if len(kept) == len(scorers):
        return scorers, ()
    return kept, tuple(o for o in scorers if o not in kept)
