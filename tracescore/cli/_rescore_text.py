"""What `tracescore rescore` prints at the end: the summary line of a run or a dry run."""

from __future__ import annotations

from typing import Any

from tracescore._words import counted


def summary_line(summary: Any) -> str:
    """"read N spans, ... ; " (the caller adds what was written)."""
    dropped = summary.stats.get("dropped", 0)
    why = ", ".join(f"{count} {reason}" for reason, count in sorted(summary.unscored.items()))
    return (f"read {counted(summary.spans_read, 'span')}, {summary.spans_selected} selected, "
            + _agent_spans(summary)
            + f"{counted(summary.stats.get('scored', 0), 'score')}, "
            + f"{summary.stats.get('failed', 0)} failed, "
            + (f"{dropped} not scored ({why}), " if dropped else "")
            + f"{_seen(summary)}{''.join(f', {text} scored' for text in _scopes(summary))}; ")


def dry_run_lines(summary: Any) -> list[str]:
    """The dry run's report: what would be made, the estimate per scorer, what was not done."""
    from tracescore.gateway._rescore_estimate import estimate_lines

    runs = sum(e.runs for e in summary.estimates)
    scopes = _scopes(summary)
    first = (f"dry run: read {counted(summary.spans_read, 'span')}, {summary.spans_selected} "
             f"selected, {_agent_spans(summary)[:-2]}; {counted(runs, 'scorer run')} "
             f"would be made, {_seen(summary)}"
             + (f"; {' and '.join(scopes)} would be scored" if scopes else ""))
    return [first, *estimate_lines(summary.estimates), "nothing was scored, written or sent"]


def _seen(summary: Any) -> str:
    return (f"{summary.skipped} skipped (already scored by the same scorer version), "
            f"{summary.rescored} re-scored")


def _scopes(summary: Any) -> list[str]:
    """Whole runs and conversations scored (when their scorers ran)."""
    return [counted(count, name[:-1]) for count, name in (
        (summary.runs_scored, "runs"), (summary.conversations_scored, "conversations"))
        if count or name in summary.scopes]


def _agent_spans(summary: Any) -> str:
    """"N agent spans offered, " and the agent-like spans that could not be read."""
    unreadable = summary.unreadable
    if not unreadable:
        return f"{counted(summary.agent_spans, 'agent span')} offered, "
    return (f"{counted(summary.agent_spans + unreadable, 'agent span')} ({unreadable} unreadable: "
            f"see the warning), {summary.agent_spans} offered, ")
