"""The work behind `tracescore eval` and `tracescore score` (cli.py only parses options)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracescore.cli._setup import (
    SetupError,
    build_scorers,
    load_target,
    parse_scorer_options,
    parse_thresholds,
    parse_tool_calls,
)

if TYPE_CHECKING:
    from tracescore._setup import TracescoreHandle
    from tracescore.scoring import ScoreResult

_RESULT_SUFFIXES = (".json", ".csv")


def run_eval_command(*, dataset: Path, target: str, scorer_names: Sequence[str],
                     scorer_option_specs: Sequence[str] = (), concurrency: int,
                     threshold_specs: Sequence[str], output: Path | None, model: str,
                     name: str | None, spans_file: Path | None, endpoint: str | None,
                     show_items: bool) -> tuple[bool | None, dict[str, str]]:
    """Evaluate, print the tables, write --output; returns the threshold verdict (None: none)
    and the scorers that scored no item, with why."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from tracescore._datasets import DatasetError, load_dataset
    from tracescore._exceptions import ConfigurationError
    from tracescore.cli import _render as render
    from tracescore.evals import run_evals

    if output is not None and output.suffix.lower() not in _RESULT_SUFFIXES:
        raise SetupError(f"--output must end in .json or .csv (got {output.name!r})")
    try:
        items = load_dataset(dataset)
    except DatasetError as exc:
        raise SetupError(str(exc)) from None
    thresholds = parse_thresholds(threshold_specs)
    agent = load_target(target)
    scorers = build_scorers(list(scorer_names), model,  # none named: relevancy and similarity
                            parse_scorer_options(scorer_option_specs))
    from tracescore.scoring._registry import SCORER_IDS

    running = {s.id for s in scorers}
    missing = set(thresholds) - running
    unknown = sorted(missing - set(SCORER_IDS))  # neither a built-in nor a named LLM judge
    if unknown:
        raise SetupError(f"--threshold names an unknown scorer {unknown[0]!r} (scorers that "
                         f"run: {', '.join(sorted(running))})")
    if missing:
        raise SetupError(f"--threshold for a scorer that does not run: {', '.join(sorted(missing))}"
                         " (add it with --scorer)")
    handle = export_to(spans_file, endpoint, service_name="tracescore-eval")

    out, err = render.console(), render.console(stderr=True)
    columns = (TextColumn("[progress.description]{task.description}"), BarColumn(),
               MofNCompleteColumn(), TimeElapsedColumn())
    try:
        with Progress(*columns, console=err, transient=True) as progress:
            task = progress.add_task("Evaluating", total=len(items))
            result = run_evals(items, scorers, agent, concurrency=concurrency,
                               thresholds=thresholds, name=name,
                               progress=lambda done, total: progress.update(task, completed=done))
    except ConfigurationError as exc:
        raise SetupError(str(exc)) from None
    finally:
        if handle is not None:
            handle.flush()
            handle.shutdown()

    if show_items:
        out.print(render.eval_items(result))
    out.print(render.eval_summary(result))
    if result.failures:
        out.print(render.eval_failures(result))
    if output is not None:
        render.write_results(output, result)
        out.print(f"Results written to {output}")
    if spans_file is not None:
        out.print(f"Spans written to {spans_file}")
    if result.passed is not None:
        out.print("[bold green]PASSED[/]: every threshold met" if result.passed else
                  "[bold red]FAILED[/]: " + render.escape(", ".join(
                      _missed(sid, result) for sid, ok in
                      result.summary.threshold_results.items() if not ok)))
    return result.passed, dict(result.summary.unscored)


def _missed(scorer_id: str, result: Any) -> str:
    """Why a threshold was missed: the mean below it, or no score at all (and why)."""
    minimum = result.summary.thresholds[scorer_id]
    mean = result.scores[scorer_id]
    if mean is None:
        why = result.summary.unscored.get(scorer_id, "no item was scored")
        return f"{scorer_id} has no score to compare with {minimum:g} ({why})"
    return f"{scorer_id} mean {_fmt(mean)} < {minimum:g}"


def run_score_command(*, input_text: str, output_text: str, ground_truth: str | None,
                      scorer_names: Sequence[str], model: str, as_json: bool,
                      scorer_option_specs: Sequence[str] = (),
                      context: Sequence[str] = (),
                      tool_call_specs: Sequence[str] = ()) -> list[ScoreResult] | None:
    """Score one pair (with its retrieved `context` and the `--tool-call`s) with each scorer and
    print the results; None when a scorer failed."""
    from tracescore._exceptions import TracescoreError
    from tracescore.cli import _render as render

    scorers = build_scorers(list(scorer_names), model, parse_scorer_options(scorer_option_specs))
    tool_calls = parse_tool_calls(tool_call_specs)
    out, err = render.console(), render.console(stderr=True)
    results: list[ScoreResult] = []
    for scorer in scorers:
        try:
            results.append(scorer.run(input=input_text, output=output_text,
                                      ground_truth=ground_truth, context=context,
                                      tool_calls=tool_calls))
        except TracescoreError as exc:
            err.print(f"[bold red]Error:[/] {render.escape(str(exc))}")
            return None
    if as_json:  # plain JSON on stdout, never re-wrapped or styled
        payload: Any = [r.to_dict() for r in results]
        sys.stdout.write(json.dumps(payload, ensure_ascii=False, indent=2, default=str) + "\n")
    else:
        for result in results:
            out.print(render.score_table(result))
    return results


def export_to(spans_file: Path | None, endpoint: str | None, *, service_name: str,
              scorers: Sequence[Any] | None = None,
              online: dict[str, Any] | None = None) -> TracescoreHandle | None:
    """configure() exporting to an OTLP JSON file and/or the env's OTLP endpoint (None: neither)."""
    from tracescore._exceptions import ConfigurationError
    from tracescore._setup import configure

    exporters: list[str] = []
    if spans_file is not None:
        exporters.append("file")
    if endpoint:
        exporters.append("otlp")  # endpoint, headers and protocol come from the OTEL_* env vars
    if not exporters and not scorers:
        return None
    try:
        return configure(service_name=service_name, exporter=exporters or "none",
                         file_path=spans_file, scorers=scorers, online=online)
    except ConfigurationError as exc:
        raise SetupError(str(exc)) from None


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"
