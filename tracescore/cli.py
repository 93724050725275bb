"""The `tracescore` command: `demo`, `eval` and `score` (also `python -m tracescore`)."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

import click

from tracescore import __version__
from tracescore._cli_setup import ENV_JUDGE_MODEL, SCORER_NAMES, SetupError

_SCORER_CHOICE = click.Choice(SCORER_NAMES, case_sensitive=False)
_JUDGE_HELP = (f"Judge model for answer relevancy: a litellm model string such as "
               f"openai/gpt-4o-mini, or tracescore/offline (deterministic, no network). "
               f"Default: ${ENV_JUDGE_MODEL}, else tracescore/offline.")
ENV_ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
EXIT_INTERRUPTED = 130  # the shell's code for a process ended by SIGINT (128 + 2)


class CommandError(click.ClickException):
    """A user error (bad file, option or target): message on stderr, exit code 2, no traceback."""

    exit_code = 2


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "-V", "--version", prog_name="tracescore",
                      message="%(prog)s %(version)s")
def main() -> None:
    """Trace LLM agents with OpenTelemetry and score their answers.

    \b
    Start with `tracescore demo` (no server, no API key needed), then score a dataset with
    `tracescore eval DATASET --target module:function`, or one answer with `tracescore score`.
    """


@main.command()
@click.option("--spans-file", type=click.Path(dir_okay=False, path_type=Path),
              default=Path("tracescore-demo-spans.jsonl"), show_default=True,
              help="Where the exported spans are written (OTLP JSON lines).")
@click.option("--judge-model", metavar="MODEL", help=_JUDGE_HELP)
def demo(spans_file: Path, judge_model: str | None) -> None:
    """Run the example agent on a few questions with online scoring, then show the traces.

    \b
    The agent (see examples/demo_agent.py) answers ~6 questions, some well, some partly, some off
    topic. Every call is traced and scored online (answer relevancy + content similarity
    against the expected answer); spans are exported to --spans-file and, when
    $OTEL_EXPORTER_OTLP_ENDPOINT is set, to that collector too. The file is then read back
    and each call is printed as a trace tree with its scores, labels and reasons.
    """
    from tracescore._cli_setup import judge_model as pick_model
    from tracescore._demo import run_demo

    try:
        run_demo(spans_file=spans_file, model=pick_model(judge_model),
                 endpoint=_otlp_endpoint())
    except SetupError as exc:
        raise CommandError(str(exc)) from None


@main.command("eval")
@click.argument("dataset", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--target", "-t", required=True, metavar="MODULE:FUNCTION",
              help="The agent to evaluate: module:function or path/to/file.py:function "
                   "(sync or async; called with each item's input).")
@click.option("--scorer", "-s", "scorers", multiple=True, type=_SCORER_CHOICE,
              help="Scorer to run (repeatable). Default: relevancy and similarity.")
@click.option("--concurrency", "-c", type=click.IntRange(min=1), default=4, show_default=True,
              help="Items evaluated at the same time.")
@click.option("--threshold", "thresholds", multiple=True, metavar="SCORER=MIN",
              help="Minimum mean score, e.g. relevancy=0.7 (repeatable); exit code 1 if missed.")
@click.option("--output", "-o", "output", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the results to a .json (everything) or .csv (one row per item) file.")
@click.option("--judge-model", metavar="MODEL", help=_JUDGE_HELP)
@click.option("--name", help="Name of the run (the agent name on its spans). Default: the "
                             "target's name.")
@click.option("--spans-file", type=click.Path(dir_okay=False, path_type=Path),
              help="Also append the run's spans to this OTLP JSON-lines file.")
@click.option("--items/--no-items", "show_items", default=True, show_default=True,
              help="Print the per-item table.")
def eval_command(dataset: Path, target: str, scorers: Sequence[str], concurrency: int,
                 thresholds: Sequence[str], output: Path | None, judge_model: str | None,
                 name: str | None, spans_file: Path | None, show_items: bool) -> None:
    """Score TARGET's answers over DATASET (.jsonl, .json or .csv).

    \b
    Each item has an "input" (the question given to the target) and optionally a
    "ground_truth" (expected answer, used by content similarity); other fields are kept as
    metadata. Every item is traced like live traffic (exported to --spans-file and to
    $OTEL_EXPORTER_OTLP_ENDPOINT when set).

    \b
    Exit codes: 0 ok, 1 a --threshold was missed, 2 bad input (file, row, target, option),
    130 interrupted (Ctrl-C, or KeyboardInterrupt raised by the target; spans are flushed).
    Example:
      tracescore eval questions.jsonl --target my_agent:answer --threshold relevancy=0.7
    """
    from tracescore._cli_commands import run_eval_command

    try:
        passed = run_eval_command(
            dataset=dataset, target=target, scorer_names=scorers, concurrency=concurrency,
            threshold_specs=thresholds, output=output, model=_model(judge_model), name=name,
            spans_file=spans_file, endpoint=_otlp_endpoint(),
            show_items=show_items,
        )
    except SetupError as exc:
        raise CommandError(str(exc)) from None
    except KeyboardInterrupt:
        click.echo("Interrupted: the evaluation stopped before its end.", err=True)
        sys.exit(EXIT_INTERRUPTED)
    if passed is False:
        sys.exit(1)


@main.command()
@click.option("--input", "-i", "input_text", required=True, help="The question or prompt.")
@click.option("--output", "-o", "output_text", required=True, help="The answer to score.")
@click.option("--ground-truth", "-g", help="Expected answer (content similarity compares "
                                           "against it; without it, against the input).")
@click.option("--scorer", "-s", "scorers", multiple=True, type=_SCORER_CHOICE,
              help="Scorer to run (repeatable). Default: relevancy and similarity.")
@click.option("--judge-model", metavar="MODEL", help=_JUDGE_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
def score(input_text: str, output_text: str, ground_truth: str | None, scorers: Sequence[str],
          judge_model: str | None, as_json: bool) -> None:
    """Score one input/output pair and print the full result: score, label, reason and the
    judge's step prompts and results.

    \b
    Example:
      tracescore score -i "What is the capital of France?" -o "Paris." -s relevancy
    """
    from tracescore._cli_commands import run_score_command

    try:
        results = run_score_command(input_text=input_text, output_text=output_text,
                                    ground_truth=ground_truth, scorer_names=scorers,
                                    model=_model(judge_model), as_json=as_json)
    except SetupError as exc:
        raise CommandError(str(exc)) from None
    if results is None:
        sys.exit(1)


def _otlp_endpoint() -> str | None:
    """The OTLP endpoint from the standard env vars (the exporter reads them itself)."""
    return next((os.environ[v] for v in ENV_ENDPOINTS if os.environ.get(v)), None)


def _model(option: str | None) -> str:
    from tracescore._cli_setup import judge_model

    return judge_model(option)



if __name__ == "__main__":  # pragma: no cover
    main()
