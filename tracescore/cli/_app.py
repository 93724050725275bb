"""The `tracescore` command: `demo`, `eval`, `score`, `serve`, `rescore` and `inspect` (also
`python -m tracescore`)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import click

from tracescore._version import __version__
from tracescore.cli._setup import ENV_JUDGE_MODEL, SCORER_NAMES, SetupError, scorer_names

_F = TypeVar("_F", bound=Callable[..., Any])
_SCORER_CHOICE = click.Choice(SCORER_NAMES, case_sensitive=False)
_JUDGE_HELP = (f"Judge model of the judged scorers: a litellm model string such as "
               f"openai/gpt-4o-mini, or tracescore/offline (deterministic, no network). "
               f"Default: ${ENV_JUDGE_MODEL}, else tracescore/offline.")
_SCORER_HELP = (f"Scorer to run (repeatable). Default: relevancy and similarity. Code scorers: "
                f"{scorer_names(judged=False)}. Judged (--judge-model): "
                f"{scorer_names(judged=True)}. Options: --scorer-option.")


def _scorer_selection(command: _F) -> _F:
    """The --scorer and --scorer-option options that `eval` and `score` share."""
    command = click.option(
        "--scorer-option", "scorer_options", multiple=True, metavar="SCORER.NAME=VALUE",
        help="An option of a scorer (repeatable), e.g. "
             "tool-call-accuracy.expected_tool=search or textual-difference.scale=10.",
    )(command)
    return click.option("--scorer", "-s", "scorers", multiple=True, type=_SCORER_CHOICE,
                        help=_SCORER_HELP)(command)


ENV_ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
EXIT_UNDELIVERED = 1  # `rescore`: some spans did not reach the endpoint
EXIT_UNSCORED = 3  # `eval`: a scorer scored no item; `rescore`: every score failed
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
    from tracescore.cli._demo import run_demo
    from tracescore.scoring._registry import judge_model as pick_model

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
@_scorer_selection
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
@click.option("--allow-errors", is_flag=True,
              help="Exit 0 even when a scorer scored no item because every call of it errored "
                   "(by default such a run exits 3).")
def eval_command(dataset: Path, target: str, scorers: Sequence[str],
                 scorer_options: Sequence[str], concurrency: int,
                 thresholds: Sequence[str], output: Path | None, judge_model: str | None,
                 name: str | None, spans_file: Path | None, show_items: bool,
                 allow_errors: bool) -> None:
    """Score TARGET's answers over DATASET (.jsonl, .json or .csv).

    \b
    Each item has an "input" (the question given to the target) and optionally a
    "ground_truth" (the expected answer), "context" (retrieved texts, for faithfulness,
    hallucination and context relevance) and "tool_calls" (the tools called: names or
    {"name", "arguments", "result", "error"} objects; in CSV a JSON array in the cell);
    other fields are kept as metadata. Every item is traced like live traffic (exported to --spans-file and to
    $OTEL_EXPORTER_OTLP_ENDPOINT when set).

    \b
    Before the first item, each judge is checked: a model litellm knows and its API key set.
    \b
    Exit codes: 0 ok, 1 a --threshold was missed, 2 bad input (file, row, target, option,
    judge model, missing API key), 3 a scorer scored no item: every call of it errored
    (--allow-errors accepts that), 130 interrupted (Ctrl-C, or KeyboardInterrupt raised by the
    target; spans are flushed).
    Example:
      tracescore eval questions.jsonl --target my_agent:answer --threshold relevancy=0.7
    """
    from tracescore.cli._commands import run_eval_command

    try:
        passed, unscored = run_eval_command(
            dataset=dataset, target=target, scorer_names=scorers,
            scorer_option_specs=scorer_options, concurrency=concurrency,
            threshold_specs=thresholds, output=output, model=_model(judge_model), name=name,
            spans_file=spans_file, endpoint=_otlp_endpoint(),
            show_items=show_items,
        )
    except SetupError as exc:
        raise CommandError(str(exc)) from None
    except KeyboardInterrupt:
        click.echo("Interrupted: the evaluation stopped before its end.", err=True)
        sys.exit(EXIT_INTERRUPTED)
    for scorer_id, why in unscored.items():
        click.echo(f"{'warning' if allow_errors else 'error'}: {scorer_id}: {why}", err=True)
    if unscored and not allow_errors:
        click.echo("No score for " + ", ".join(unscored) + " (every call errored); "
                   "--allow-errors accepts such a run.", err=True)
        sys.exit(EXIT_UNSCORED)
    if passed is False:
        sys.exit(1)


@main.command()
@click.option("--input", "-i", "input_text", required=True, help="The question or prompt.")
@click.option("--output", "-o", "output_text", required=True, help="The answer to score.")
@click.option("--ground-truth", "-g", help="Expected answer (content similarity compares "
                                           "against it; without it, against the input).")
@click.option("--context", "-c", "context", multiple=True, metavar="TEXT",
              help="A retrieved text the answer was given (repeatable), for faithfulness, "
                   "hallucination and context relevance.")
@click.option("--tool-call", "tool_calls", multiple=True, metavar="NAME|JSON",
              help="A tool the agent called, in call order (repeatable), for the tool-call "
                   "accuracy scorers: a name, or a JSON object with name and optionally "
                   "arguments, result, error, e.g. '{\"name\": \"refund\", \"arguments\": "
                   "{\"order\": 7}}'.")
@_scorer_selection
@click.option("--judge-model", metavar="MODEL", help=_JUDGE_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
def score(input_text: str, output_text: str, ground_truth: str | None, context: Sequence[str],
          tool_calls: Sequence[str], scorers: Sequence[str], scorer_options: Sequence[str],
          judge_model: str | None, as_json: bool) -> None:
    """Score one input/output pair and print the full result: score, label, reason and the
    judge's step prompts and results.

    \b
    Example:
      tracescore score -i "What is the capital of France?" -o "Paris." -s relevancy
    """
    from tracescore.cli._commands import run_score_command

    try:
        results = run_score_command(input_text=input_text, output_text=output_text,
                                    ground_truth=ground_truth, context=context,
                                    tool_call_specs=tool_calls, scorer_names=scorers,
                                    scorer_option_specs=scorer_options,
                                    model=_model(judge_model), as_json=as_json)
    except SetupError as exc:
        raise CommandError(str(exc)) from None
    if results is None:
        sys.exit(1)


@main.command()
@click.option("--config", "-c", "config_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Gateway config file (YAML). Default: $TRACESCORE_GATEWAY_CONFIG.")
@click.option("--grpc", "grpc_endpoint", metavar="HOST:PORT",
              help="OTLP/gRPC receiver address (default 0.0.0.0:4317; 'off' disables).")
@click.option("--http", "http_endpoint", metavar="HOST:PORT",
              help="OTLP/HTTP receiver address (default 0.0.0.0:4318; 'off' disables).")
@click.option("--health", "health_endpoint", metavar="HOST:PORT",
              help="Health and metrics address (default 0.0.0.0:13133; 'off' disables).")
@click.option("--endpoint", metavar="URL", help="Next hop (collector or backend). Default: "
              "$OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / $OTEL_EXPORTER_OTLP_ENDPOINT.")
@click.option("--protocol", type=click.Choice(["grpc", "http/protobuf"]),
              help="Protocol to the next hop (default grpc, or $OTEL_EXPORTER_OTLP_PROTOCOL).")
@click.option("--journal", "journal_path", metavar="FILE",
              help="Journal file (SQLite) of accepted spans not yet forwarded.")
@click.option("--judge-model", metavar="MODEL", help=_JUDGE_HELP)
@click.option("--set", "settings", multiple=True, metavar="KEY=VALUE",
              help="Any config key, e.g. --set scoring.max_wait_s=10 (value read as YAML; "
                   "repeatable).")
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(["debug", "info", "warning", "error"]))
def serve(config_file: Path | None, grpc_endpoint: str | None, http_endpoint: str | None,
          health_endpoint: str | None, endpoint: str | None, protocol: str | None,
          journal_path: str | None, judge_model: str | None, settings: Sequence[str],
          log_level: str) -> None:
    """Run the scoring gateway: receive OTLP traces from any language, score agent spans,
    forward every span to the next hop.

    \b
    Configuration: the YAML file, then environment variables, then these options.
    A bad setting exits with code 2 and names the key. SIGTERM drains and exits 0.
    Example:
      tracescore serve --endpoint http://collector:4317 --judge-model openai/gpt-4o-mini
    """
    from tracescore._exceptions import ConfigurationError
    from tracescore.gateway._config import load_gateway_config
    from tracescore.gateway._serve import serve as run
    from tracescore.gateway._serve import setup_logging

    setup_logging(log_level)
    overrides: dict[str, object] = {}
    for key, value in (("receivers.grpc", grpc_endpoint), ("receivers.http", http_endpoint),
                       ("receivers.health", health_endpoint), ("exporter.endpoint", endpoint),
                       ("exporter.protocol", protocol), ("journal.path", journal_path),
                       ("scoring.judge_model", judge_model)):
        if value is not None:
            overrides[key] = None if value == "off" else value
    try:
        overrides.update(_settings(settings))
        config = load_gateway_config(config_file, overrides)
        code = run(config)
    except ConfigurationError as exc:
        raise CommandError(str(exc)) from None
    sys.exit(code)


@main.command()
@click.argument("inputs", nargs=-1, required=True,
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--config", "-c", "config_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Gateway config file (YAML) for scorers, judge and recognisers.")
@click.option("--scorer", "-s", "scorers", multiple=True, type=_SCORER_CHOICE,
              help="Scorer to run (repeatable). Default: the config's, else relevancy and "
                   "similarity.")
@click.option("--judge-model", metavar="MODEL", help=_JUDGE_HELP)
@click.option("--agent", "agents", multiple=True, metavar="NAME",
              help="Only score calls of this agent (repeatable).")
@click.option("--rate", type=click.FloatRange(0, 1), help="Fraction of traces to score "
              "(decided from the trace id, as online).")
@click.option("--since", type=click.DateTime(), help="Only spans that started at or after this "
              "time (UTC).")
@click.option("--until", type=click.DateTime(), help="Only spans that started before this time "
              "(UTC).")
@click.option("--output", "-o", "output", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the spans to this OTLP JSON-lines file.")
@click.option("--endpoint", metavar="URL", help="Send the spans to this OTLP endpoint instead.")
@click.option("--protocol", type=click.Choice(["grpc", "http/protobuf"]), default="grpc",
              show_default=True, help="Protocol for --endpoint.")
@click.option("--all-spans", is_flag=True, help="Write every selected span, not only agent spans.")
@click.option("--force", is_flag=True, help="Also score spans that already carry a result of the "
              "same scorer version (default: skip them).")
@click.option("--dry-run", is_flag=True, help="Count the judge calls and estimate their cost "
              "(litellm's prices), then stop: nothing is scored, written or sent.")
@click.option("--progress/--no-progress", default=None,
              help="Progress bar on stderr (default: when stderr is a terminal).")
def rescore(inputs: Sequence[Path], config_file: Path | None, scorers: Sequence[str],
            judge_model: str | None, agents: Sequence[str], rate: float | None,
            since: datetime | None, until: datetime | None, output: Path | None,
            endpoint: str | None, protocol: str, all_spans: bool, force: bool, dry_run: bool,
            progress: bool | None) -> None:
    """Score stored traces again: the agent spans of INPUTS (OTLP JSON lines, as tracescore's
    and the Collector's file exporters write them) get new score events.

    \b
    Example: run a new scorer version over last week's traffic, after seeing its cost
      tracescore rescore traces.jsonl --since 2026-11-24 -s relevancy --dry-run
      tracescore rescore traces.jsonl --since 2026-11-24 -s relevancy -o rescored.jsonl
    \b
    A span that already carries a result of the same scorer version is skipped (--force scores
    it again); new results are added beside the old ones.
    \b
    Exit codes: 0 every span written; 1 some spans did not reach --endpoint (down, refused or
    rejected them: the last line says how many and why); 2 a bad option, a bad input line
    (FILE:LINE), no spans in INPUTS, or a judge that cannot work (unknown model, no API key:
    checked before anything is read, also for --dry-run); 3 every score failed.
    """
    from tracescore._exceptions import ConfigurationError
    from tracescore.gateway._rescore import run_rescore_command

    if not dry_run and (output is None) == (endpoint is None):
        raise CommandError("give one of --output FILE or --endpoint URL")
    try:
        summary = run_rescore_command(
            inputs, config_file=config_file, scorer_names=scorers, judge_model=judge_model,
            agents=agents, rate=rate, since=since, until=until, output=output,
            endpoint=endpoint, protocol=protocol, all_spans=all_spans,
            progress=sys.stderr.isatty() if progress is None else progress,
            warn=lambda text: click.echo(f"warning: {text}", err=True), force=force,
            dry_run=dry_run,
        )
    except ConfigurationError as exc:
        raise CommandError(str(exc)) from None
    for scorer_id, missing in summary.no_reference.items():
        click.echo(f"warning: {missing.warning(scorer_id)}", err=True)
    from tracescore._words import counted as n
    from tracescore.cli._rescore_text import dry_run_lines, summary_line

    if dry_run:
        for text in dry_run_lines(summary):
            click.echo(text)
        return
    line = summary_line(summary)
    if summary.undelivered:
        click.echo(f"{line}wrote {summary.spans_delivered} of {n(summary.spans_written, 'span')}: "
                   f"{summary.undelivered}", err=True)
        sys.exit(EXIT_UNDELIVERED)
    click.echo(f"{line}wrote {n(summary.spans_written, 'span')}")
    failed, scored = summary.stats.get("failed", 0), summary.stats.get("scored", 0)
    if failed and not scored:
        click.echo(f"error: every score failed ({failed}); the spans were written with the "
                   f"failures as evaluation events (see error.type)", err=True)
        sys.exit(EXIT_UNSCORED)


@main.command()
@click.argument("inputs", nargs=-1, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--config", "-c", "config_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Gateway config file (YAML), for its recognise: mappings and builtins.")
@click.option("--listen", is_flag=True, help="Receive OTLP instead of reading INPUTS (traces, "
              "and logs: GenAI content records are joined to their spans).")
@click.option("--grpc-endpoint", metavar="HOST:PORT", default="0.0.0.0:4317", show_default=True,
              help="With --listen: OTLP/gRPC receiver address ('off' disables).")
@click.option("--http-endpoint", metavar="HOST:PORT", default="0.0.0.0:4318", show_default=True,
              help="With --listen: OTLP/HTTP receiver address ('off' disables).")
@click.option("--for", "seconds", type=click.FloatRange(min=0, min_open=True), default=60.0,
              show_default=True, metavar="SECONDS", help="With --listen: how long to receive.")
@click.option("--all", "all_spans", is_flag=True, help="Also list the spans that are no agent "
              "calls (default: their count).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of text.")
def inspect(inputs: Sequence[Path], config_file: Path | None, listen: bool, grpc_endpoint: str,
            http_endpoint: str, seconds: float, all_spans: bool, as_json: bool) -> None:
    """Show what would be scored of each agent span of INPUTS (OTLP JSON lines, as `rescore`
    reads them), or of the OTLP received with --listen: the question, answer, agent, earlier
    turns, tool calls and context the scorers would get, or why a span that looks like an
    agent call cannot be read, with a recognise.mappings entry that reads it.

    \b
    Examples:
      tracescore inspect traces.jsonl --config gateway.yaml
      tracescore inspect --listen --for 30      (point the agent's OTLP exporter here)
    \b
    Exit codes: 0 done; 2 a bad option, a bad input line (FILE:LINE) or no spans in INPUTS.
    """
    from tracescore._exceptions import ConfigurationError
    from tracescore.cli._inspect import run_inspect_command

    if listen == bool(inputs):
        raise CommandError("give INPUTS or --listen (not both)")
    try:
        run_inspect_command(
            inputs, config_file=config_file, as_json=as_json, all_spans=all_spans,
            listen=listen, grpc_endpoint=None if grpc_endpoint == "off" else grpc_endpoint,
            http_endpoint=None if http_endpoint == "off" else http_endpoint, seconds=seconds,
            warn=lambda text: click.echo(f"warning: {text}", err=True))
    except ConfigurationError as exc:
        raise CommandError(str(exc)) from None


def _settings(items: Sequence[str]) -> dict[str, object]:
    """`--set key=value` pairs, values read as YAML scalars or flow collections."""
    import yaml

    from tracescore._exceptions import ConfigurationError

    parsed: dict[str, object] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigurationError(f"--set {item!r}: write it as KEY=VALUE")
        try:
            parsed[key.strip()] = yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            raise ConfigurationError(f"{key.strip()}: bad value {raw!r}: {exc}") from None
    return parsed


def _otlp_endpoint() -> str | None:
    """The OTLP endpoint from the standard env vars (the exporter reads them itself)."""
    return next((os.environ[v] for v in ENV_ENDPOINTS if os.environ.get(v)), None)


def _model(option: str | None) -> str:
    from tracescore.scoring._registry import judge_model

    return judge_model(option)


def _add_calibration_commands() -> None:
    from tracescore.cli._calibrate import calibrate_command, sample_command

    main.add_command(calibrate_command)
    main.add_command(sample_command)
    from tracescore.cli._report import report_command

    main.add_command(report_command)


_add_calibration_commands()

if __name__ == "__main__":  # pragma: no cover
    main()
