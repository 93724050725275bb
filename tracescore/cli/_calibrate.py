"""`tracescore calibrate` (agreement of a scorer with human labels, with a kappa gate) and
`tracescore sample` (a labelling file drawn from stored traces)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from tracescore._private_files import write_private
from tracescore.cli._setup import ENV_JUDGE_MODEL, SCORER_NAMES, SetupError

if TYPE_CHECKING:
    from rich.table import Table

    from tracescore.calibration import CalibrationReport

EXIT_UNSCORED = 3  # the scorer scored no item
EXIT_BELOW_KAPPA = 4  # the kappa is below --min-kappa (or undefined)
_SCORER = click.Choice(SCORER_NAMES, case_sensitive=False)


class _UsageError(click.ClickException):
    """Bad input: message on stderr, exit code 2."""

    exit_code = 2


def _floats(text: str | None, option: str) -> tuple[float, ...] | None:
    if text is None:
        return None
    try:
        return tuple(float(part) for part in text.split(","))
    except ValueError:
        raise _UsageError(f"{option} takes numbers separated by commas, got {text!r}") from None


@click.command("calibrate")
@click.argument("dataset", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--scorer", "-s", required=True, type=_SCORER, help="The scorer to calibrate.")
@click.option("--scorer-option", "scorer_options", multiple=True, metavar="SCORER.NAME=VALUE",
              help="An option of the scorer (repeatable).")
@click.option("--judge-model", metavar="MODEL",
              help=f"Judge model (litellm model string). Default: ${ENV_JUDGE_MODEL}, else "
                   "tracescore/offline.")
@click.option("--label-column", default="label", show_default=True,
              help="The column (key) holding the human label.")
@click.option("--kind", type=click.Choice(["pass_fail", "categories", "score"]),
              help="What the labels are. Default: inferred (pass/fail words, numbers, or "
                   "known ordered categories).")
@click.option("--categories", metavar="BEST,...,WORST",
              help="Ordered categories, best first, e.g. relevant,partial,irrelevant.")
@click.option("--threshold", type=click.FloatRange(0, 1), default=0.5, show_default=True,
              help="Score (as a fraction of the scale) from which the judge says pass.")
@click.option("--cuts", metavar="C1,...", help="For k categories, k-1 decreasing scores (0..1) "
              "where the judge's categories begin, e.g. 0.7,0.3. Default: equal bins.")
@click.option("--higher-is-worse/--higher-is-better", "higher_is_worse", default=None,
              help="Whether a higher score means a worse answer. Default: worse for "
                   "hallucination, toxicity and bias.")
@click.option("--label-scale", type=click.FloatRange(min=0, min_open=True), default=1.0,
              show_default=True, help="Top of the human score range (scores run 0..this).")
@click.option("--pass-categories", type=click.IntRange(min=1), default=1, show_default=True,
              help="How many of the best categories count as pass (TPR, TNR).")
@click.option("--kappa-weights", type=click.Choice(["none", "linear", "quadratic"]),
              default="none", show_default=True,
              help="Which kappa --min-kappa compares for ordered categories.")
@click.option("--min-kappa", type=float, metavar="K",
              help=f"Exit {EXIT_BELOW_KAPPA} when the kappa is below K.")
@click.option("--json", "json_path", metavar="FILE",
              help="Write the report as JSON to FILE ('-' for stdout).")
@click.option("--report", "html_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the report as a self-contained HTML page.")
@click.option("--show", type=click.IntRange(min=0), default=10, show_default=True,
              help="Disagreements printed, worst first.")
@click.option("--concurrency", "-c", type=click.IntRange(min=1), default=4, show_default=True)
@click.option("--resamples", type=click.IntRange(min=0), default=1000, show_default=True,
              help="Bootstrap resamples of the confidence intervals (0: none).")
@click.option("--seed", type=int, default=0, show_default=True, help="Bootstrap seed.")
@click.option("--phoenix", "phoenix_url", metavar="URL",
              help="Read the labels from this Phoenix instead of DATASET.")
@click.option("--project", default="default", show_default=True, help="With --phoenix: project.")
@click.option("--annotation", metavar="NAME", help="With --phoenix: the annotation name people "
              "labelled with.")
@click.option("--any-annotator", is_flag=True,
              help="With --phoenix: count annotations of LLM and code annotators too.")
def calibrate_command(dataset: Path | None, scorer: str, scorer_options: Sequence[str],
                      judge_model: str | None, label_column: str, kind: str | None,
                      categories: str | None, threshold: float, cuts: str | None,
                      higher_is_worse: bool | None, label_scale: float, pass_categories: int,
                      kappa_weights: str, min_kappa: float | None, json_path: str | None,
                      html_path: Path | None, show: int, concurrency: int, resamples: int,
                      seed: int, phoenix_url: str | None, project: str, annotation: str | None,
                      any_annotator: bool) -> None:
    """Measure how well SCORER agrees with human labels in DATASET (.jsonl, .json or .csv).

    \b
    Each item has "input", "output" (the answer that was labelled), a human label (default
    column "label": pass/fail, an ordered category, or a score; empty: skipped) and, where the
    scorer needs them, "ground_truth", "context" and "tool_calls". The scorer's score is mapped
    to the label space (--threshold, --cuts) and compared: Cohen's kappa (weighted for ordered
    categories), TPR/TNR, confusion matrix, Spearman, bootstrap confidence intervals, the
    judge's cost and the disagreements, worst first.
    \b
    Exit codes: 0 done (and the kappa reaches --min-kappa); 2 bad input; 3 the scorer scored
    no item; 4 the kappa is below --min-kappa (or undefined).
    Example:
      tracescore calibrate labels.csv -s relevancy --judge-model openai/gpt-4o-mini \\
          --categories relevant,partial,irrelevant --cuts 0.7,0.3 --min-kappa 0.6
    """
    from tracescore._exceptions import ConfigurationError, ScorerError
    from tracescore.calibration import LabelSpec, calibrate
    from tracescore.calibration._html import write_html
    from tracescore.cli._setup import build_scorers, parse_scorer_options

    if (dataset is None) == (phoenix_url is None):
        raise _UsageError("give DATASET or --phoenix URL (not both)")
    try:
        data: Any = dataset
        if phoenix_url is not None:
            data = _phoenix_items(phoenix_url, project, annotation, label_column, any_annotator)
        from tracescore.scoring._registry import judge_model as pick_model

        built = build_scorers([scorer], pick_model(judge_model),
                              parse_scorer_options(scorer_options))[0]
        spec = LabelSpec(kind=kind,  # type: ignore[arg-type]
                         categories=tuple(c.strip() for c in categories.split(","))
                         if categories else None, threshold=threshold,
                         cuts=_floats(cuts, "--cuts"), higher_is_worse=higher_is_worse,
                         label_scale=label_scale, pass_categories=pass_categories)
        report = _with_progress(lambda progress: calibrate(
            data, built, labels=spec, label_key=label_column, concurrency=concurrency,
            min_kappa=min_kappa, kappa_weights=kappa_weights, resamples=resamples, seed=seed,
            progress=progress))
    except ScorerError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_UNSCORED)
    except (SetupError, ConfigurationError) as exc:
        raise _UsageError(str(exc)) from None
    if json_path == "-":
        sys.stdout.write(json.dumps(report.to_dict(), ensure_ascii=False, indent=2) + "\n")
    else:
        _print(report, show, resamples)
        if json_path is not None:
            write_private(json_path, json.dumps(report.to_dict(), ensure_ascii=False,
                                                indent=2) + "\n")
            click.echo(f"JSON report written to {json_path}")
    if html_path is not None:
        write_html(report, html_path)
        click.echo(f"HTML report written to {html_path}", err=json_path == "-")
    if report.passed is False:
        click.echo(f"FAILED: kappa {_num(report.gate_kappa)} is below --min-kappa "
                   f"{min_kappa:g}", err=True)
        sys.exit(EXIT_BELOW_KAPPA)
    if report.passed:
        click.echo(f"PASSED: kappa {_num(report.gate_kappa)} reaches --min-kappa "
                   f"{min_kappa:g}", err=json_path == "-")


def _with_progress(run: Any) -> CalibrationReport:
    """`run(progress)` with a progress bar on stderr (hidden when it is no terminal)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from tracescore.cli import _render as render

    columns = (TextColumn("Scoring"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, console=render.console(stderr=True), transient=True) as bar:
        task = bar.add_task("scoring", total=None)
        report: CalibrationReport = run(
            lambda done, total: bar.update(task, completed=done, total=total))
    return report


def _phoenix_items(url: str, project: str, annotation: str | None, label_column: str,
                   any_annotator: bool) -> list[dict[str, Any]]:
    from tracescore._exceptions import ConfigurationError
    from tracescore.cli._phoenix_labels import read_phoenix_labels

    if not annotation:
        raise _UsageError("--phoenix needs --annotation NAME (the annotation people gave)")
    items = read_phoenix_labels(url, project, annotation,
                                annotator_kind=None if any_annotator else "HUMAN")
    if not items:
        raise ConfigurationError(f"Phoenix project {project!r} has no agent call with a "
                                 f"{'' if any_annotator else 'human '}annotation {annotation!r}")
    for item in items:
        item[label_column] = item.pop("label")
    return items


def _print(report: CalibrationReport, show: int, resamples: int) -> None:
    from tracescore.cli import _render as render

    out = render.console()
    out.print(_summary_table(report, resamples))
    out.print(_confusion_table(report))
    rows = report.disagreements[:show]
    if rows:
        from rich.table import Table

        table = Table(title=f"Disagreements, worst first ({len(rows)} of "
                            f"{len(report.disagreements)})")
        for column in ("#", "input", "output", "human", "judge", "score", "reason"):
            table.add_column(column, overflow="fold")
        for r in rows:
            table.add_row(str(r.index), render.short(r.input, 60), render.short(r.output, 60),
                          render.escape(str(r.human_label)), r.judge_label, f"{r.score:g}",
                          render.short(r.reason or "", 80))
        out.print(table)
    for error in report.errors[:5]:
        out.print(f"[red]item {error.index}: {error.error_type}: "
                  f"{render.escape(error.message)}[/]")


_UNBOUNDED = frozenset({"accuracy", "base_rate", "judge_pass_rate"})  # shown without interval


def _no_interval(key: str, value: float | None, resamples: int) -> str:
    """Why a statistic has no interval ("" for those never given one)."""
    if key in _UNBOUNDED or value is None:
        return ""
    if not resamples and key not in ("tpr", "tnr"):
        return "not computed (--resamples 0)"
    return "undefined (too few items of a label)"


def _summary_table(report: CalibrationReport, resamples: int) -> Table:
    from rich.table import Table

    from tracescore.calibration._html import stat_rows

    a, cost = report.agreement, report.cost
    table = Table(title=f"Calibration of {report.scorer_id} against {a.n} human labels "
                        f"({report.space.kind})")
    for column, justify in (("statistic", "left"), ("value", "right"),
                            (f"{round(a.confidence * 100)}% interval", "right")):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for title, key, value in stat_rows(report):
        interval = a.intervals.get(key)
        table.add_row(title, _num(value),
                      f"{_num(interval.low)} .. {_num(interval.high)}" if interval
                      else _no_interval(key, value, resamples))
    table.add_row("Scorer version", report.scorer_version or "-", "")
    table.add_row("Judge", report.judge_model or "-", "")
    table.add_row("Judge calls / tokens", f"{cost.judge_calls} / "
                  f"{cost.input_tokens + cost.output_tokens}", "")
    table.add_row("Cost (USD)", "unknown" if cost.cost_usd is None else f"{cost.cost_usd:.4f}",
                  "")
    table.add_row("Time", f"{cost.duration_s:.1f} s ({_num(cost.mean_latency_ms, 0)} ms/item)",
                  "")
    table.add_row("Unlabelled / errors", f"{report.unlabelled} / {len(report.errors)}", "")
    return table


def _confusion_table(report: CalibrationReport) -> Table:
    from rich.table import Table

    table = Table(title="Confusion matrix (rows: people, columns: judge)")
    table.add_column("")
    names = report.space.categories
    for name in names:
        table.add_column(name, justify="right")
    for i, (name, row) in enumerate(zip(names, report.agreement.confusion)):
        table.add_row(name, *(f"[bold]{v}[/]" if i == j else str(v) for j, v in enumerate(row)))
    return table


@click.command("sample")
@click.argument("traces", nargs=-1, required=True,
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--scorer", "-s", required=True, metavar="NAME",
              help="The scorer whose scores stratify the sample (a name, or an LLM judge's).")
@click.option("--n", "count", type=click.IntRange(min=1), default=100, show_default=True,
              help="How many calls to draw.")
@click.option("--strata", type=click.IntRange(min=1), default=5, show_default=True,
              help="Equal bins of the score range the calls are spread over.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--out", "-o", "out", type=click.Path(dir_okay=False, path_type=Path),
              default=Path("labels.csv"), show_default=True,
              help="The labelling file (.csv or .jsonl).")
def sample_command(traces: Sequence[Path], scorer: str, count: int, strata: int, seed: int,
                   out: Path) -> None:
    """Draw scored agent calls from stored TRACES (OTLP JSON lines) into a labelling file.

    \b
    The calls are stratified by the scorer's score (--strata equal bins, shared out evenly) and
    drawn with --seed, so the same traces and seed give the same file. The file has the
    question and answer as the scorers read them and an empty "label" column (the score is
    left out, so people label blind); label it, then run `tracescore calibrate` on it.
    \b
    Exit codes: 0 written; 2 bad input or no scored call of the scorer in TRACES.
    """
    from tracescore._exceptions import ConfigurationError
    from tracescore.cli._sample import check_output, scored_calls, stratified, write_labelling_file

    try:
        check_output(out)
        from tracescore.scoring._registry import scorer_id

        try:
            wanted = scorer_id(scorer)
        except ConfigurationError:
            wanted = scorer  # an LLM judge's own name
        spans = [span for path in traces for span in _spans(path)]
        calls = scored_calls(spans, wanted)
        if not calls:
            raise ConfigurationError(f"no agent call scored by {wanted!r} in "
                                     f"{', '.join(map(str, traces))}")
        written = write_labelling_file(out, stratified(calls, count, strata=strata, seed=seed))
    except ConfigurationError as exc:
        raise _UsageError(str(exc)) from None
    click.echo(f"{written} of {len(calls)} scored calls written to {out}")


def _spans(path: Path) -> list[Any]:
    from tracescore._exceptions import ConfigurationError
    from tracescore.cli._otlp import read_spans

    try:
        return read_spans(path)
    except ValueError as exc:
        raise ConfigurationError(f"{path}: {exc}") from None


def _num(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"
